/* The user's own runtime directory (userdir.h). */
#include "base/userdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int gs_user_runtime_dir(char *out, size_t len, int create)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    int n;

    if (xdg && xdg[0] == '/')
        n = snprintf(out, len, "%s/gpuscope", xdg);
    else
        n = snprintf(out, len, "/tmp/gpuscope-%lu", (unsigned long)getuid());
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (lstat(out, &st) != 0) {
        if (errno != ENOENT || !create)
            return -1;
        if (mkdir(out, 0700) != 0 && errno != EEXIST)
            return -1;
        if (lstat(out, &st) != 0)
            return -1;
    }
    /* $XDG_RUNTIME_DIR itself is the user's alone (0700), so what is inside needs only be
     * theirs; /tmp is everyone's, so the directory must be closed as well */
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
        (!(xdg && xdg[0] == '/') && (st.st_mode & 077))) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

int gs_user_runtime_path(char *out, size_t len, const char *name)
{
    char dir[512];
    int n;

    if (gs_user_runtime_dir(dir, sizeof dir, 0) != 0)
        return -1;
    n = snprintf(out, len, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int gs_unix_socket_answers(const char *path, int type)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd, ok;

    if (strlen(path) >= sizeof sa.sun_path)
        return 0;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}
