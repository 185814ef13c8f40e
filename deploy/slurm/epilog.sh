#!/bin/sh
# gpuscope jobstats as a Slurm epilog (docs/jobstats.md, "SLURM EPILOG"): at the end of a job,
# append its GPU summary (per node and GPU: utilization, memory, idle-held time, energy, and
# notes) to the job's standard output file, where the user reads the rest of the job's output.
#
#   slurm.conf:   Epilog=/etc/slurm/epilog.d/*      (or Epilog=/path/to/epilog.sh)
#   install:      install -m 0755 deploy/slurm/epilog.sh /etc/slurm/epilog.d/50-gpuscope.sh
#
# slurmd runs it as root on every node of the job once the job's processes are gone, with
# SLURM_JOB_ID, SLURM_JOB_UID, SLURM_JOB_GID, SLURM_JOB_NODELIST and SLURMD_NODENAME set. Each node asks its own agent (the unix
# socket /run/gpuscope/agent.sock); a multi-node job gets one summary per node, each naming its
# node. With GPUSCOPE_JOBSTATS_AGENTS set (a URL pattern, %s the node name, e.g.
# "https://%s:9400"), only the job's first node writes, one summary combining every node's
# agent (`gpuscope jobstats --from`; a token in GPUSCOPE_TOKEN or GPUSCOPE_TOKEN_FILE).
#
# An epilog that fails drains the node, so this one always exits 0: what goes wrong is logged
# by logger(1) (tag gpuscope-epilog) and the job's output is left as it was.
#
# Settings (environment, or edit here):
#   GPUSCOPE                  the gpuscope executable (default: gpuscope on PATH)
#   GPUSCOPE_JOBSTATS_OUT     the file to append to (default: the job's StdOut from scontrol)
#   GPUSCOPE_JOBSTATS_AGENTS  see above (default: unset, each node its own summary)
#   GPUSCOPE_JOBSTATS_SETTLE  seconds to wait first so that the agent's history holds the
#                             job's last seconds (default 6: its flush_interval is 5 s)
set -u

GPUSCOPE=${GPUSCOPE:-gpuscope}
job=${SLURM_JOB_ID:-}
log() { logger -t gpuscope-epilog -- "job ${job:-?}: $*" 2>/dev/null || :; }

[ -n "$job" ] || { log "SLURM_JOB_ID is not set"; exit 0; }

out=${GPUSCOPE_JOBSTATS_OUT:-}
if [ -z "$out" ]; then
    # StdOut= of `scontrol show job`; interactive jobs (srun, salloc) have none
    out=$(scontrol show job "$job" 2>/dev/null | sed -n 's/^[[:space:]]*StdOut=//p' | head -n 1)
fi
case "$out" in
    /*) ;;
    *) log "no output file to append to (StdOut='$out')"; exit 0 ;;
esac
[ -f "$out" ] || { log "$out is not a file"; exit 0; }

from=""
if [ -n "${GPUSCOPE_JOBSTATS_AGENTS:-}" ] && [ -n "${SLURM_JOB_NODELIST:-}" ]; then
    nodes=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null)
    first=$(printf '%s\n' "$nodes" | head -n 1)
    # slurmd names this node in SLURMD_NODENAME (a Slurm node name need not be the host name)
    self=${SLURMD_NODENAME:-$(hostname -s 2>/dev/null || hostname)}
    if [ -n "$first" ] && [ "$first" != "$self" ]; then
        exit 0 # the first node writes the combined summary
    fi
    for n in $nodes; do
        # shellcheck disable=SC2059 # the pattern is the format
        from="$from${from:+,}$(printf "$GPUSCOPE_JOBSTATS_AGENTS" "$n")"
    done
fi

sleep "${GPUSCOPE_JOBSTATS_SETTLE:-6}"
tmp=$(mktemp "${TMPDIR:-/tmp}/gpuscope-epilog.XXXXXX") || { log "mktemp failed"; exit 0; }
trap 'rm -f "$tmp"' EXIT
set -- jobstats "$job"
[ -z "$from" ] || set -- "$@" --from "$from"
[ -z "${GPUSCOPE_TOKEN_FILE:-}" ] || set -- "$@" --token-file "$GPUSCOPE_TOKEN_FILE"
if ! NO_COLOR=1 "$GPUSCOPE" "$@" >"$tmp" 2>&1; then
    log "gpuscope jobstats failed: $(tr '\n' ' ' <"$tmp")"
    exit 0
fi

# Append as the job's user: the file is theirs, and root may not write on root-squashed NFS.
append() { { printf '\n==== gpuscope jobstats %s ====\n' "$job"; cat "$tmp"; } >>"$out"; }
uid=${SLURM_JOB_UID:-}
if [ "$(id -u)" = "0" ] && [ -n "$uid" ] && [ "$uid" != "0" ]; then
    chmod 0644 "$tmp"
    # shellcheck disable=SC2016 # expanded by the inner sh
    if ! setpriv --reuid="$uid" --regid="${SLURM_JOB_GID:-$(id -g "$uid" 2>/dev/null || echo "$uid")}" \
            --clear-groups sh -c '{ printf "\n==== gpuscope jobstats %s ====\n" "$1"; cat "$2"; } >>"$3"' \
            sh "$job" "$tmp" "$out"; then
        log "cannot append to $out as uid $uid"
    fi
else
    append || log "cannot append to $out"
fi
exit 0
