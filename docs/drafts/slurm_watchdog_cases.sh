#!/usr/bin/env bash
# The fault matrix of the watchdog prototype (docs/drafts/slurm_watchdog_prototype.cpp) under
# srun (scripts/slurm-local.sh must be up: eval "$(bash scripts/slurm-local.sh env)") and mpirun.
# One line per case: exit status, seconds from the fault (or the signal) to the end of the job,
# points committed by rank 0, and the lines the ranks printed.
#
#   mpicxx -std=c++20 -O1 -pthread docs/drafts/slurm_watchdog_prototype.cpp -o /tmp/wd
#   bash docs/drafts/slurm_watchdog_cases.sh /tmp/wd [--with-baseline]
#
# --with-baseline adds the cases without the watchdog (WD=0): 30 s (KillWait) and 12 s (a hang,
# cut by the script) each.
set -uo pipefail
WD=$(realpath "$1")
BASELINE=${2:-}
WORK=$(mktemp -d /tmp/wd-cases.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export DB=$WORK/points.txt
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)

wait_idle() { for _ in $(seq 300); do [[ -z $(squeue -h 2>/dev/null) ]] && return; sleep 0.2; done; }
mono() { python3 -c 'import time; print(time.monotonic())'; }

# run NAME SIGNAL_AFTER ENV… -- CMD…   (SIGNAL_AFTER: seconds after which the job gets SIGTERM —
# scancel for srun jobs (job name NAME), kill for mpirun; "-" for none; a guard ends any case
# after 40 s)
run() {
  local name=$1 sig=$2; shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  wait_idle
  rm -f "$DB"
  local log=$WORK/$name.log sig_t=""
  env "${envs[@]}" "$@" >"$log" 2>&1 &
  local pid=$!
  if [[ $sig != - ]]; then
    sleep "$sig"
    sig_t=$(mono)
    if [[ $1 == srun ]]; then scancel --name="$name"; else kill -TERM "$pid"; fi
  fi
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.05
    waited=$((waited + 1))
    if ((waited == 800)); then
      j=$(squeue -h -n "$name" -o %i | head -n 1)
      [[ -n $j ]] && for n in $(sinfo -h -N -o %N); do scontrol listpids "$j" "$n" 2>/dev/null; done |
        awk '$1 ~ /^[0-9]+$/ {print $1}' | xargs -r kill -KILL
      kill -KILL "$pid" 2>/dev/null
      echo "(stopped by the script after 40 s)" >>"$log"
    fi
  done
  wait "$pid"
  local rc=$? end ft took
  end=$(mono)
  ft=$(sed -n 's/^fault: .* at \([0-9.]*\)$/\1/p' "$log" | head -n 1)
  [[ -z $ft ]] && ft=$sig_t
  took=-
  [[ -n $ft ]] && took=$(printf '%.2f' "$(echo "$end - $ft" | bc)")
  printf '%-22s exit %-4s end-fault %6s s  points %-4s %s\n' "$name" "$rc" "$took" \
    "$(grep -c . "$DB" 2>/dev/null || echo 0)" \
    "$(grep -E '^moeplan: error' "$log" | sed 's/moeplan: error: //' | sort | uniq -c |
      awk '{$1=$1}1' | tr '\n' ';' | cut -c1-150)"
}

S=(srun --mpi=pmix -N2 -n2)
K=(--kill-on-bad-exit=1)
run srun_none - -- srun -J srun_none --mpi=none -N2 -n2 "$WD" 20
run srun_pmi2 - -- srun -J srun_pmi2 --mpi=pmi2 -N2 -n2 "$WD" 20
run srun_ok - -- "${S[@]}" -J srun_ok "$WD" 20
run srun_2x2_ok - -- srun -J srun_2x2_ok --mpi=pmix -N2 --ntasks-per-node=2 "$WD" 20
run mpirun_ok - -- "${MPIRUN[@]}" -np 3 "$WD" 20
run srun_kill_kobe - FAULT=1,10,kill -- "${S[@]}" "${K[@]}" -J srun_kill_kobe "$WD" 100
run srun_kill - FAULT=1,10,kill -- "${S[@]}" -J srun_kill "$WD" 100
run srun_kill_rank0 - FAULT=0,10,kill -- "${S[@]}" "${K[@]}" -J srun_kill_rank0 "$WD" 100
run srun_exit_kobe - FAULT=1,10,exit -- "${S[@]}" "${K[@]}" -J srun_exit_kobe "$WD" 100
run srun_exit - FAULT=1,10,exit -- "${S[@]}" -J srun_exit "$WD" 100
run srun_2x2_kill - FAULT=2,10,kill -- srun -J srun_2x2_kill --mpi=pmix -N2 --ntasks-per-node=2 "$WD" 100
run srun_term_blocked 3 BLOCK=20 -- "${S[@]}" "${K[@]}" -J srun_term_blocked "$WD" 100
run mpirun_kill - FAULT=1,10,kill -- "${MPIRUN[@]}" -np 2 "$WD" 100
run mpirun_exit - FAULT=1,10,exit -- "${MPIRUN[@]}" -np 2 "$WD" 100
run mpirun_kill_np4 - FAULT=2,10,kill -- "${MPIRUN[@]}" -np 4 "$WD" 100
run mpirun_term_blocked 3 BLOCK=20 -- "${MPIRUN[@]}" -np 2 "$WD" 100
run srun_kill_abort - WD_ABORT=1 FAULT=1,10,kill -- "${S[@]}" -J srun_kill_abort "$WD" 100
if [[ $BASELINE == --with-baseline ]]; then
  run base_srun_kill_kobe - WD=0 FAULT=1,10,kill -- "${S[@]}" "${K[@]}" -J base_srun_kill_kobe "$WD" 100
  run base_srun_kill - WD=0 FAULT=1,10,kill -- "${S[@]}" -J base_srun_kill "$WD" 100
  run base_srun_exit_kobe - WD=0 FAULT=1,10,exit -- "${S[@]}" "${K[@]}" -J base_srun_exit_kobe "$WD" 100
  run base_srun_term_blocked 3 WD=0 BLOCK=20 -- "${S[@]}" "${K[@]}" -J base_srun_term_blocked "$WD" 100
  run base_mpirun_kill - WD=0 FAULT=1,10,kill -- "${MPIRUN[@]}" -np 2 "$WD" 100
fi
