/* dev_signer.c - see dev_signer.h.
 *
 * Why create a user: the signer must run as a user of its own, different from
 * the front end's (nobody), and a fresh Debian 12 has none that fits: borrowing
 * daemon or another shared account would hand the token to whatever else runs
 * under it. So `hsmca dev`, and only when run as root, does what a package's
 * postinst would do (useradd --system), once, and says so. */
#include "dev_signer.h"

#include <errno.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

#define USERADD "/usr/sbin/useradd"

/* Runs argv[0] with argv, waits; returns its exit status (-1: not run). */
static int run(char *const argv[])
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

hsmca_code dev_signer_user_ensure(int *created, hsmca_err *e)
{
    *created = 0;
    if (geteuid() != 0 || getpwnam(DEV_SIGNER_USER))
        return HSMCA_OK;
    char *const argv[] = {USERADD, "--system", "--user-group", "--no-create-home",
                          "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                          "--comment", "hsmca signer (created by hsmca dev)", DEV_SIGNER_USER,
                          NULL};
    int rc = run(argv);
    /* Another `hsmca dev` may have created it meanwhile (useradd then fails). */
    if (getpwnam(DEV_SIGNER_USER)) {
        *created = rc == 0;
        if (*created)
            LOG_EVENT(LOG_LVL_INFO, "created the system user for the signer",
                      LOG_STR("user", DEV_SIGNER_USER));
        return HSMCA_OK;
    }
    return hsmca_fail(e, HSMCA_EIO,
                      "the signer needs a user of its own and `%s --system ... %s` failed "
                      "(status %d): create it yourself, or run hsmca dev as a plain user",
                      USERADD, DEV_SIGNER_USER, rc);
}

static uid_t grant_uid;
static gid_t grant_gid;

static int chown_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return lchown(path, grant_uid, grant_gid) == 0 ? 0 : -1;
}

static HSMCA_MUSTCHECK hsmca_code set_owner(const char *path, uid_t uid, gid_t gid, mode_t mode, hsmca_err *e)
{
    /* The mode first, while root may still own the file, and only what differs: a
     * container granted CHOWN but not FOWNER (deploy/kubernetes demo) may not chmod a
     * file another user owns. */
    struct stat st;
    if (stat(path, &st) != 0)
        return hsmca_fail(e, HSMCA_EIO, "%s: %s", path, strerror(errno));
    if ((st.st_mode & 07777) != mode && chmod(path, mode) != 0)
        return hsmca_fail(e, HSMCA_EIO, "chmod %s: %s", path, strerror(errno));
    if ((st.st_uid != uid || st.st_gid != gid) && chown(path, uid, gid) != 0)
        return hsmca_fail(e, HSMCA_EIO, "chown %s: %s", path, strerror(errno));
    return HSMCA_OK;
}

/* In a child that has become the user: can it reach what SoftHSM re-reads? */
static HSMCA_MUSTCHECK hsmca_code check_as_user(const struct passwd *pw, const char *tokens, const char *conf,
                                hsmca_err *e)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return hsmca_fail(e, HSMCA_EIO, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) != 0 ||
            setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) != 0)
            _exit(3);
        if (access(tokens, R_OK | W_OK | X_OK) != 0)
            _exit(1);
        _exit(access(conf, R_OK) == 0 ? 0 : 2);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return hsmca_fail(e, HSMCA_EIO, "waitpid: %s", strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return HSMCA_OK;
    int what = WIFEXITED(status) ? WEXITSTATUS(status) : 3;
    if (what == 3)
        return hsmca_fail(e, HSMCA_EIO, "cannot switch to %s to check its access",
                          DEV_SIGNER_USER);
    return hsmca_fail(e, HSMCA_EINVAL,
                      "the signer runs as %s and cannot reach %s (a parent directory is not "
                      "searchable by it): use a --dir outside it, e.g. under /var/lib or /srv",
                      DEV_SIGNER_USER, what == 1 ? tokens : conf);
}

hsmca_code dev_signer_grant(const char *dir, hsmca_err *e)
{
    if (geteuid() != 0)
        return HSMCA_OK;
    struct passwd *pw = getpwnam(DEV_SIGNER_USER);
    if (!pw)
        return hsmca_fail(e, HSMCA_EINVAL, "user %s does not exist", DEV_SIGNER_USER);
    struct passwd who = *pw;
    char tokens[PATH_MAX], conf[PATH_MAX];
    snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
    snprintf(conf, sizeof(conf), "%s/softhsm2.conf", dir);
    /* Every start: what a root tool wrote into the token since is made the
     * signer's again. */
    grant_uid = who.pw_uid;
    grant_gid = who.pw_gid;
    if (nftw(tokens, chown_one, 16, FTW_PHYS) != 0)
        return hsmca_fail(e, HSMCA_EIO, "chown -R %s %s: %s", DEV_SIGNER_USER, tokens,
                          strerror(errno));
    hsmca_code rc = set_owner(conf, 0, who.pw_gid, 0640, e);
    if (rc == HSMCA_OK)
        rc = set_owner(dir, 0, who.pw_gid, 0710, e);
    if (rc == HSMCA_OK)
        rc = check_as_user(&who, tokens, conf, e);
    return rc;
}

hsmca_code dev_signer_crl_dir(const char *dir, hsmca_err *e)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/crl", dir);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return hsmca_fail(e, HSMCA_EIO, "mkdir %s: %s", path, strerror(errno));
    if (geteuid() != 0)
        return HSMCA_OK;
    struct passwd *pw = getpwnam(DEV_SIGNER_USER);
    if (!pw)
        return hsmca_fail(e, HSMCA_EINVAL, "user %s does not exist", DEV_SIGNER_USER);
    return set_owner(path, pw->pw_uid, pw->pw_gid, 0755, e);
}
