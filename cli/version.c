/* version.c - see version.h. HSMCA_COMMIT and the pkg-config versions of gRPC core and
 * libyaml (whose headers name none) come from CMakeLists.txt at configure time. */
#include "version.h"

#include <stdio.h>

#include <grpc/grpc.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#include <protobuf-c/protobuf-c.h>
#include <seccomp.h>
#include <yaml.h>

#ifndef HSMCA_COMMIT
#define HSMCA_COMMIT "unknown"
#endif
#ifndef HSMCA_GRPC_BUILT
#define HSMCA_GRPC_BUILT "unknown"
#endif
#ifndef HSMCA_YAML_BUILT
#define HSMCA_YAML_BUILT "unknown"
#endif

int version_main(void)
{
    const struct scmp_version *sv = seccomp_version();
    printf("hsmca %s (commit %s)\n", HSMCA_VERSION, HSMCA_COMMIT);
    printf("openssl %s (built with %s)\n", OpenSSL_version(OPENSSL_VERSION_STRING),
           OPENSSL_VERSION_STR);
    printf("grpc core %s (built with %s)\n", grpc_version_string(), HSMCA_GRPC_BUILT);
    printf("protobuf-c %s (built with %s)\n", protobuf_c_version(), PROTOBUF_C_VERSION);
    printf("jansson %s (built with %s)\n", jansson_version_str(), JANSSON_VERSION);
    printf("libyaml %s (built with %s)\n", yaml_get_version_string(), HSMCA_YAML_BUILT);
    if (sv)
        printf("libseccomp %u.%u.%u (built with %d.%d.%d)\n", sv->major, sv->minor, sv->micro,
               SCMP_VER_MAJOR, SCMP_VER_MINOR, SCMP_VER_MICRO);
    else
        printf("libseccomp unknown (built with %d.%d.%d)\n", SCMP_VER_MAJOR, SCMP_VER_MINOR,
               SCMP_VER_MICRO);
    return 0;
}
