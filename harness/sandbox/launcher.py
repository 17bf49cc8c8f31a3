"""The program the full sandbox starts inside its new namespaces (see the package docstring)."""

# The launcher runs as root inside the new namespaces (pid 1 is unshare's child; this execs into the
# program so that the program is the namespace's init). Standard library only, run with -I -S.
# It builds the allow-listed root on an empty tmpfs, pivots into it, drops privileges and execs.
_LAUNCHER = r"""
import ctypes, json, os, resource, sys
spec = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = (
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203, "s390x": 217, "riscv64": 41}

def mount(src, target, fstype, flags, data=None):
    rc = libc.mount(src and src.encode(), target.encode(), fstype and fstype.encode(), ctypes.c_ulong(flags),
                    data and data.encode())
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, "mount %s: %s" % (target, os.strerror(err)))

def fail(msg):
    sys.stderr.write("sandbox setup failed: %s\n" % msg)
    os._exit(125)

def under(path, roots):
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

def mountinfo():
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            out.append((fields[4].encode().decode("unicode_escape"), fields[5].split(",")))
    return out

try:
    if spec["cgroup_procs"]:  # first: every process of the tree is born inside the memory cgroup
        with open(spec["cgroup_procs"], "w") as fh:
            fh.write("0")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    os.umask(0o022)
    writable = [os.path.realpath(p) for p in spec["writable"]]
    links, readable = {}, []
    for p in spec["readable"]:
        if os.path.islink(p) and os.path.dirname(p) == "/":  # /lib -> usr/lib: recreate the link
            links[p] = os.readlink(p)
        if os.path.exists(p):
            readable.append(os.path.realpath(p))
    readable = [p for p in dict.fromkeys(readable) if not under(p, [r for r in readable if r != p])]
    expose = [(p, False) for p in readable if p not in writable] + [(p, True) for p in dict.fromkeys(writable)]
    # hold every exposed path by an O_PATH descriptor: the new root's tmpfs may cover where they live
    fds = {p: os.open(p, os.O_PATH) for p, _ in expose}
    root = next(d for d in ("/mnt", "/media", "/srv", "/opt", "/var", "/tmp") if os.path.isdir(d)
                and not os.path.islink(d))
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m,nr_inodes=4096")
    for p, rw in sorted(expose, key=lambda e: len(e[0])):
        target = root + p
        if os.path.isdir("/proc/self/fd/%d" % fds[p]):
            os.makedirs(target, exist_ok=True)
        elif not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        mount("/proc/self/fd/%d" % fds[p], target, None, MS_BIND)
        os.close(fds[p])
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | (0 if rw else MS_RDONLY))
    for p, target in links.items():
        if not os.path.lexists(root + p):
            os.symlink(target, root + p)
    # a minimal passwd/group naming only root and the sandbox's uid (some libraries, bpy among them,
    # crash without one; the host's would list its users)
    os.makedirs(root + "/etc", exist_ok=True)
    uid = spec["uid"]
    for name, text in (("passwd", "root:x:0:0:root:/:/usr/sbin/nologin\nsandbox:x:%d:%d:sandbox:%s:/usr/sbin/nologin\n"
                        % (uid, uid, spec["workdir"])), ("group", "root:x:0:\nsandbox:x:%d:\n" % uid)):
        if not os.path.lexists(root + "/etc/" + name):
            with open(root + "/etc/" + name, "w") as fh:
                fh.write(text)
    dev = root + "/dev"
    os.makedirs(dev, exist_ok=True)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for name in ("null", "zero", "full", "random", "urandom"):
        if os.path.exists("/dev/" + name):
            open(dev + "/" + name, "a").close()
            mount("/dev/" + name, dev + "/" + name, None, MS_BIND)
            mount(None, dev + "/" + name, None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, dev + "/" + name)
    os.makedirs(dev + "/shm")
    mount("tmpfs", dev + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    mount(None, dev, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    os.makedirs(root + "/proc", exist_ok=True)
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.chdir(root)
    if libc.syscall(SYS_PIVOT_ROOT[spec["machine"]], b".", b".") != 0:
        raise OSError(ctypes.get_errno(), "pivot_root")
    if libc.umount2(b".", 2) != 0:  # MNT_DETACH: the old root, stacked on top of the new one
        raise OSError(ctypes.get_errno(), "umount old root")
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    # verify before handing over: every mount is nosuid, and nothing but the writable paths (and the
    # private /dev/shm) accepts a new file
    skip = set(writable) | {"/dev/shm", "/proc"}
    for mp, opts in mountinfo():
        if "nosuid" not in opts:
            fail("%s is not nosuid" % mp)
        if mp in skip or under(mp, ["/proc"]) or not os.path.isdir(mp):
            continue
        probe = os.path.join(mp, ".sandbox-write-probe-%d" % os.getpid())
        try:
            open(probe, "w").close()
        except OSError:
            continue
        os.unlink(probe)
        fail("%s still writable" % mp)
    lim = spec["limits"]
    resource.setrlimit(resource.RLIMIT_AS, (lim["as"], lim["as"]))
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu"], lim["cpu"] + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (lim["fsize"], lim["fsize"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (lim["nproc"], lim["nproc"]))
    uid = spec["uid"]
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    # changing credentials clears the parent-death signal unshare --kill-child set: arm it again, so
    # that killing unshare kills this init and with it the whole PID namespace
    if libc.prctl(1, 9, 0, 0, 0) != 0:  # PR_SET_PDEATHSIG, SIGKILL
        fail("prctl(PR_SET_PDEATHSIG) failed")
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: no setuid/file-capability gain via exec
        fail("prctl(PR_SET_NO_NEW_PRIVS) failed")
    # a new, empty session keyring (owned by the sandbox's uid): the caller's is inherited across
    # fork and exec, and a process "possesses" its session keyring, so the caller's keys in it would be
    # readable. Where keyctl itself is unavailable (no CONFIG_KEYS, a seccomp filter) the probe below
    # fails too and there is nothing to reach.
    libc.syscall.restype = ctypes.c_long
    keyctl = spec["keyctl"]
    if keyctl is None:
        fail("no keyctl syscall number for %s" % spec["machine"])
    if libc.syscall(keyctl, 1, None) < 0:  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
        if libc.syscall(keyctl, 0, ctypes.c_long(-3), 0) >= 0:  # KEYCTL_GET_KEYRING_ID of @s still works
            fail("cannot give the program its own session keyring (%s)" % os.strerror(ctypes.get_errno()))
    os.chdir(spec["workdir"])
    os.umask(0o077)
    for fd in spec["keep_fds"]:
        os.set_inheritable(fd, True)
except Exception as exc:
    fail(repr(exc))
try:
    os.execvpe(spec["argv"][0], spec["argv"], spec["env"])
except OSError as exc:
    sys.stderr.write("sandbox: cannot execute %s: %s\n" % (spec["argv"][0], exc))
    os._exit(127)
"""
