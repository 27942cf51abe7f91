/* ca_show_rot.c - `hsmca ca show`'s "rotation" section (ca_show.h): where a rotation is,
 * by the rotation's own reading of the config (rot_state_of), and what each of its files
 * and the next key hold. */
#include "ca_show.h"

#include <stdio.h>
#include <string.h>

#include "ca_rotate.h"

/* The certificate in path as ca_show_cert_json with "file", or "KEY_error". */
static void put_file_cert(json_t *o, const char *key, const char *path)
{
    hsmca_err e;
    char name[64];
    if (!path[0])
        return;
    X509 *x = rot_load_one(path, key, &e);
    if (x) {
        json_t *c = ca_show_cert_json(x);
        json_object_set_new(c, "file", json_string(path));
        json_object_set_new(o, strchr(key, '.') + 1, c);
        X509_free(x);
    } else {
        snprintf(name, sizeof(name), "%s_error", strchr(key, '.') + 1);
        json_object_set_new(o, name, json_string(e.msg));
    }
}

/* "next_token_key": "match" (the token holds ca.next_key and it is ca.next_cert's),
 * "mismatch", "present" (no ca.next_cert yet to compare with) or "error". */
static void put_next_token(json_t *o, ca_session *s, X509 *next)
{
    EVP_PKEY *key = NULL;
    hsmca_err e;
    char hex[CA_HEX_LEN] = "";
    if (rot_session_next_key(s, &key, &e) != HSMCA_OK) {
        json_object_set_new(o, "next_token_key", json_string("error"));
        json_object_set_new(o, "next_token_error", json_string(e.msg));
        return;
    }
    ca_spki_sha256(key, hex);
    json_object_set_new(o, "next_token_key",
                        json_string(!next                                           ? "present"
                                    : EVP_PKEY_eq(key, X509_get0_pubkey(next)) == 1 ? "match"
                                                                                    : "mismatch"));
    json_object_set_new(o, "next_token_spki_sha256", json_string(hex));
    EVP_PKEY_free(key);
}

/* "next_root_in_bundle" when the new CA's root is known. */
static void put_next_root(json_t *o, const hsmca_config *c, STACK_OF(X509) * bundle)
{
    hsmca_err e;
    X509 *root = c->ca_next_cert[0] ? rot_next_root(c, &e) : NULL;
    if (!root)
        return;
    json_object_set_new(o, "next_root_in_bundle",
                        json_boolean(bundle && rot_find(bundle, root) >= 0));
    X509_free(root);
}

void ca_show_rotation(json_t *doc, ca_session *s)
{
    const hsmca_config *c = s->cfg;
    hsmca_err e, why;
    STACK_OF(X509) *bundle = certfile_load(c->root_bundle, "ca.root_bundle", &e);
    rot_state st = rot_state_of(c, bundle, &why);
    if (st == ROT_NONE) {
        sk_X509_pop_free(bundle, X509_free);
        return;
    }
    json_t *o = json_object();
    json_object_set_new(o, "state", json_string(rot_state_name(st)));
    json_object_set_new(o, "next_step", json_string(rot_state_next(c, st)));
    if (st == ROT_UNCLEAR)
        json_object_set_new(o, "error", json_string(why.msg));
    put_file_cert(o, "ca.next_cert", c->ca_next_cert);
    put_file_cert(o, "ca.next_root", c->ca_next_root);
    put_file_cert(o, "ca.previous_cert", c->ca_previous_cert);
    if (c->ca_next_chain[0])
        json_object_set_new(o, "next_chain", json_string(c->ca_next_chain));
    if (c->ca_previous_chain[0])
        json_object_set_new(o, "previous_chain", json_string(c->ca_previous_chain));
    if (c->ca_previous_key[0])
        json_object_set_new(o, "previous_key", json_string(c->ca_previous_key));
    put_next_root(o, c, bundle);
    if (c->ca_next_key[0]) {
        X509 *next = c->ca_next_cert[0] ? rot_load_one(c->ca_next_cert, "ca.next_cert", &e) : NULL;
        json_object_set_new(o, "next_key", json_string(c->ca_next_key));
        put_next_token(o, s, next);
        X509_free(next);
    }
    json_object_set_new(doc, "rotation", o);
    sk_X509_pop_free(bundle, X509_free);
}

static void print_file_cert(json_t *rot, const char *name, const char *key)
{
    char err[64];
    json_t *c = json_object_get(rot, name);
    snprintf(err, sizeof(err), "%s_error", name);
    if (c) {
        printf("  %s %s\n", key, ca_show_str(c, "file"));
        ca_show_print_cert(c, "    ");
    } else if (json_object_get(rot, err)) {
        printf("  %s: DOES NOT LOAD: %s\n", key, ca_show_str(rot, err));
    }
}

void ca_show_rotation_text(json_t *rot)
{
    if (!rot)
        return;
    const char *next = ca_show_str(rot, "next_step");
    printf("rotation: %s%s%s%s\n", ca_show_str(rot, "state"),
           next[0] ? " (next: hsmca ca rotate " : "", next, next[0] ? ")" : "");
    if (json_object_get(rot, "error"))
        printf("  %s\n", ca_show_str(rot, "error"));
    if (json_object_get(rot, "next_key")) {
        const char *tk = ca_show_str(rot, "next_token_key");
        printf("  ca.next_key %s: ", ca_show_str(rot, "next_key"));
        if (!strcmp(tk, "match"))
            puts("in the token, ca.next_cert's key");
        else if (!strcmp(tk, "present"))
            puts("in the token");
        else if (!strcmp(tk, "mismatch"))
            printf("in the token but NOT ca.next_cert's key: its spki sha256 is %s\n",
                   ca_show_str(rot, "next_token_spki_sha256"));
        else
            printf("cannot open: %s\n", ca_show_str(rot, "next_token_error"));
    }
    print_file_cert(rot, "next_cert", "ca.next_cert");
    print_file_cert(rot, "next_root", "ca.next_root");
    if (json_object_get(rot, "next_root_in_bundle"))
        printf("  the new CA's root is %sin ca.root_bundle\n",
               json_is_true(json_object_get(rot, "next_root_in_bundle")) ? "" : "not yet ");
    if (json_object_get(rot, "previous_key"))
        printf("  ca.previous_key %s\n", ca_show_str(rot, "previous_key"));
    print_file_cert(rot, "previous_cert", "ca.previous_cert");
}
