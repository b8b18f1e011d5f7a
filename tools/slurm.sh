#!/usr/bin/env bash
# A one-node Slurm cluster for the tests, run as root without systemd:
#   tools/slurm.sh up DIR     writes DIR/slurm.conf, starts munged, slurmctld and slurmd, waits for the node
#   tools/slurm.sh down DIR   stops exactly the daemons `up` started, by the PIDs it kept in DIR
# Clients find the cluster through SLURM_CONF=DIR/slurm.conf. Debian's slurm-wlm, munge and lmod
# must be installed (tools/test.sh installs them).
set -euo pipefail
cmd=${1:?usage: tools/slurm.sh up|down DIR}
dir=${2:?usage: tools/slurm.sh up|down DIR}

stop() {
    for name in slurmd slurmctld munged; do
        pidfile="$dir/$name.pid"
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
}

if [ "$cmd" = down ]; then
    stop
    exit 0
fi
[ "$cmd" = up ] || { echo "usage: tools/slurm.sh up|down DIR" >&2; exit 2; }

mkdir -p "$dir/state" "$dir/spool" "$dir/log" "$dir/munge"
dir=$(cd "$dir" && pwd)
node=$(hostname -s)
cpus=$(nproc)
# RealMemory must not exceed what slurmd measures, or the node is drained at registration
mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
mem=$((mem * 9 / 10))
# ports free now, so that a cluster already running on this machine does not collide with this one
read -r ctld_port slurmd_port < <(python3 -c 'import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
cat >"$dir/slurm.conf" <<EOF
ClusterName=envkit-test
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pidfile
SlurmdPidFile=$dir/slurmd.pidfile
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=30
KillWait=5
InactiveLimit=0
NodeName=$node CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF="$dir/slurm.conf"

# munge: its own key and socket under DIR, run as the munge user as the package intends
mkdir -p /run/munge /var/log/munge /var/lib/munge /etc/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge /etc/munge
[ -f /etc/munge/munge.key ] || { dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none; }
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
if ! pgrep -x munged >/dev/null; then
    runuser -u munge -- /usr/sbin/munged --force
    for _ in $(seq 50); do pid=$(pgrep -x -u munge munged || true); [ -n "$pid" ] && break; sleep 0.1; done
    echo "$pid" >"$dir/munged.pid"
fi

slurmctld -D -f "$SLURM_CONF" >"$dir/log/slurmctld.out" 2>&1 &
echo $! >"$dir/slurmctld.pid"
slurmd -D -f "$SLURM_CONF" >"$dir/log/slurmd.out" 2>&1 &
echo $! >"$dir/slurmd.pid"

for _ in $(seq 100); do
    if sinfo -h -N -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
        echo "slurm up: SLURM_CONF=$SLURM_CONF node $node, $cpus CPUs"
        exit 0
    fi
    sleep 0.2
done
echo "slurm did not come up; logs in $dir/log" >&2
tail -5 "$dir/log/"*.log >&2 || true
stop
exit 1
