"""Files in a `gpuscope run` directory that no other user can steer (the package's side of
src/base/dirfile.c).

The directory is opened once (O_DIRECTORY|O_NOFOLLOW) and checked: not writable by others, nor
by its group unless that is the owner's private group (umask 002 setups), owned by this
process's user or by root (a root `gpuscope run` around a command that
drops privileges). Every file is created through that descriptor with
O_CREAT|O_EXCL|O_NOFOLLOW under a fresh temporary name and renamed into place, so a link
planted at any name is never followed and a reader sees a whole file or none. A request file
(hang.request, profile.request) is honoured only when it is a regular file of the directory's
owner, opened without following a link.
"""
import os
import secrets
import stat

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _private_group(uid, gid):
    """The owner's primary group, named as the owner, no other member (src/base/dirfile.c)."""
    import grp
    import pwd
    try:
        pw, gr = pwd.getpwuid(uid), grp.getgrgid(gid)
    except KeyError:
        return False
    return pw.pw_gid == gid and gr.gr_name == pw.pw_name and \
        all(m == pw.pw_name for m in gr.gr_mem)


def _check(fd, what):
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError("%s is not a directory" % what)
    if st.st_uid not in (os.geteuid(), 0):
        raise PermissionError("%s belongs to uid %d: its owner could plant links or files in it"
                              % (what, st.st_uid))
    if st.st_mode & stat.S_IWOTH or \
            (st.st_mode & stat.S_IWGRP and not _private_group(st.st_uid, st.st_gid)):
        raise PermissionError("%s is writable by other users (mode %04o): another user could "
                              "plant links or files in it" % (what, stat.S_IMODE(st.st_mode)))


def open_dir(path, dir_fd=None, create=False, mode=0o755):
    """The directory path (relative to dir_fd when given) opened and checked; the caller closes
    the descriptor. With create, a missing last component is made (mode). Raises OSError (a
    link: OSError ELOOP or NotADirectoryError; another user's or a shared one: PermissionError)."""
    if create:
        try:
            os.mkdir(path, mode, dir_fd=dir_fd)
        except FileExistsError:
            pass
    fd = os.open(path, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        _check(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write(dir_fd, name, data, mode=0o644, sync=True):
    """Writes data (bytes) as the whole file name in dir_fd: a fresh temporary created
    exclusively without following links, fsync (unless not sync: a file rewritten often from
    the training path, where a reader needs a whole file but not one that survives a power
    cut), then renamed over name (a link there is replaced, never written through)."""
    tmp = ".%s.tmp-%s" % (name, secrets.token_hex(6))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                 dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def reserve(dir_fd, name, mode=0o644):
    """A fresh temporary file of ours beside name for a writer that opens by path (torch's
    trace export): returns (tmp, path): tmp its name in dir_fd, path a path to it through the
    descriptor itself; rename it into place with os.replace(tmp, name, src_dir_fd=dir_fd,
    dst_dir_fd=dir_fd)."""
    tmp = ".%s.tmp-%s" % (name, secrets.token_hex(6))
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode, dir_fd=dir_fd))
    return tmp, "/proc/self/fd/%d/%s" % (dir_fd, tmp)


def read_request(dir_fd, name, limit=64):
    """The text of the request file name when it is a regular file of the directory's owner
    (what `gpuscope run` or `gpuscope trace capture` wrote), else None."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.fstat(dir_fd).st_uid:
            return None
        return os.read(fd, limit).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)
