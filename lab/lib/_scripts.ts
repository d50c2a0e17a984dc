// Shell programs the lab runs as root to start machines. Arguments are always passed
// positionally ("$1" …), never pasted into the text.

/**
 * Launcher, run in a fresh private mount namespace (unshare --mount):
 * $1 log file, $2 root mount point, $3 lower, $4 upper, $5 work, $6 cgroup dirs (":"),
 * then the command to exec in its own session. The overlay exists only in this
 * namespace, so it disappears with the machine's last process.
 */
export const LAUNCH = `set -eu
exec >>"$1" 2>&1
IFS=:
for d in $6; do echo "$$" > "$d/cgroup.procs"; done
unset IFS
mount -t overlay overlay -o "lowerdir=$3,upperdir=$4,workdir=$5" "$2"
shift 6
exec setsid "$@"
`;

/**
 * Inside new pid/mount/uts/ipc namespaces (PID 1 there): $1 root, $2 host name,
 * $3 the PID 1 program (sh text run in the new root), then pairs "source target"
 * to bind read-only. Builds /proc, /sys, /dev, /run, /tmp and pivots into the root.
 */
export const ENTER_ROOT = `set -eu
root=$1 name=$2 init=$3
shift 3
mount -t proc proc "$root/proc"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs "$root/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/tmp"
mount -t tmpfs -o mode=0755,nosuid tmpfs "$root/dev"
for n in null zero full random urandom tty; do
  : > "$root/dev/$n"
  mount --bind "/dev/$n" "$root/dev/$n"
done
mkdir "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
ln -s pts/ptmx "$root/dev/ptmx"
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
while [ "$#" -ge 2 ]; do
  if [ -d "$1" ]; then
    mkdir -p "$root$2"
  else
    mkdir -p "$(dirname "$root$2")"
    [ -e "$root$2" ] || : > "$root$2"
  fi
  mount --bind "$1" "$root$2"
  mount -o remount,bind,ro "$root$2"
  shift 2
done
hostname "$name"
mkdir -p "$root/.oldroot"
cd "$root"
pivot_root . .oldroot
umount -l /.oldroot
rmdir /.oldroot
exec /bin/sh -c "$init"
`;

/** PID 1 of an OpenRC machine: boot the runlevels, then reap; SIGTERM shuts down. */
export const OPENRC_INIT = `trap 'openrc shutdown; exit 0' TERM INT
if openrc sysinit && openrc boot && openrc default; then
  : > /run/lab-ready
else
  echo "openrc failed to boot" > /run/lab-failed
fi
while :; do sleep 2147483647 & wait "$!" || :; done
`;

/** PID 1 of a plain machine: nothing to start; reap until SIGTERM. */
export const PLAIN_INIT = `trap 'exit 0' TERM INT
: > /run/lab-ready
while :; do sleep 2147483647 & wait "$!" || :; done
`;

/** Writes stdin to "$1" inside a machine, creating parent directories; mode "$2". */
export const WRITE_FILE = `set -eu
mkdir -p "$(dirname "$1")"
tmp="$1.lab-tmp"
cat > "$tmp"
chmod "$2" "$tmp"
mv -f "$tmp" "$1"
`;
