"""Offline validation of Kubernetes objects against the API's own model classes (Debian's
python3-kubernetes: each model's openapi_types and attribute_map are the API schema of
its kind): every field known to the kind (unknown fields are what the API server drops
or refuses), every value of its type, every required field present. For
test_k8s_manifests.py."""
import inspect
import re

import kubernetes.client as kc

# apiVersion group -> the model classes' prefix (V1, not the group: the client names
# its models by version only, and every kind hsmca ships is v1 of its group).
GROUP_VERSIONS = {"v1", "apps/v1", "policy/v1", "networking.k8s.io/v1",
                  "rbac.authorization.k8s.io/v1"}

_REQUIRED = re.compile(r"Invalid value for `(\w+)`, must not be `None`")


def model_for(api_version, kind):
    if api_version not in GROUP_VERSIONS:
        raise AssertionError("%s %s: apiVersion not one this test knows" % (api_version, kind))
    cls = getattr(kc, "V1" + kind, None)
    if cls is None:
        raise AssertionError("%s %s: no such kind in the Kubernetes API models" %
                             (api_version, kind))
    return cls


def required_fields(cls):
    """The JSON names of the fields the model's setters refuse to leave unset."""
    attrs = set(_REQUIRED.findall(inspect.getsource(cls)))
    return {cls.attribute_map[a] for a in attrs if a in cls.attribute_map}


def _check_value(value, type_name, path, problems):
    if value is None:
        return
    if type_name == "object":  # IntOrString, raw extensions: any JSON value
        return
    if type_name == "str":
        if not isinstance(value, str):
            problems.append("%s: %r is not a string" % (path, value))
        return
    if type_name == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append("%s: %r is not an integer" % (path, value))
        return
    if type_name == "bool":
        if not isinstance(value, bool):
            problems.append("%s: %r is not a boolean" % (path, value))
        return
    if type_name == "float":
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            problems.append("%s: %r is not a number" % (path, value))
        return
    if type_name == "datetime":
        if not isinstance(value, str):
            problems.append("%s: %r is not a timestamp" % (path, value))
        return
    m = re.fullmatch(r"list\[(.+)\]", type_name)
    if m:
        if not isinstance(value, list):
            problems.append("%s: not a list" % path)
            return
        for i, item in enumerate(value):
            _check_value(item, m.group(1), "%s[%d]" % (path, i), problems)
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if m:
        if not isinstance(value, dict):
            problems.append("%s: not a mapping" % path)
            return
        for k, v in value.items():
            if not isinstance(k, str):
                problems.append("%s: key %r is not a string" % (path, k))
            _check_value(v, m.group(1), "%s.%s" % (path, k), problems)
        return
    cls = getattr(kc, type_name, None)
    if cls is None:
        problems.append("%s: the models have no type %s" % (path, type_name))
        return
    check_object(value, cls, path, problems)


def check_object(obj, cls, path, problems):
    """Appends to problems every field of obj (a dict) unknown to cls, of the wrong type,
    or required and missing, recursively."""
    if not isinstance(obj, dict):
        problems.append("%s: not a mapping (%s expected)" % (path, cls.__name__))
        return
    json_to_attr = {j: a for a, j in cls.attribute_map.items()}
    for key, value in obj.items():
        attr = json_to_attr.get(key)
        if attr is None:
            problems.append("%s.%s: unknown field of %s" % (path, key, cls.__name__))
            continue
        _check_value(value, cls.openapi_types[attr], "%s.%s" % (path, key), problems)
    for key in sorted(required_fields(cls)):
        if obj.get(key) is None:
            problems.append("%s.%s: required field of %s missing" % (path, key, cls.__name__))


def validate(doc):
    """The problems of one rendered object (an empty list: it validates)."""
    problems = []
    cls = model_for(doc.get("apiVersion"), doc.get("kind"))
    name = (doc.get("metadata") or {}).get("name", "?")
    check_object(doc, cls, "%s/%s" % (doc.get("kind"), name), problems)
    return problems
