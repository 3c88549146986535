#!/usr/bin/env bash
# Sampling ahead in a thread vs a child process with 1 or 2 torch threads, ABBA, one line per run
# (benchmarks/results/peers/grpo_overlap_sampler_threads.md). Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_WAIT_POLICY=PASSIVE TOKENIZERS_PARALLELISM=false
M=$(python -c "from rlgym_llm.rollout.tiny_model import build_tiny_model; print(build_tiny_model())")
P=$(mktemp --suffix .json)
python -c "import json, random, sys; sys.path.insert(0, \"benchmarks/peers\"); import gsm8k_like; rng = random.Random(0); print(json.dumps([gsm8k_like.row(rng)[\"question\"] for _ in range(32)]))" > "$P"
uptime
for v in "loop 1" "loop-overlap-thread 1" "loop-overlap 1" "loop-overlap 2" "loop-overlap 2" "loop-overlap 1" "loop-overlap-thread 1" "loop 1"; do
  set -- $v
  /usr/bin/time -f "TIME %e %U %S" python benchmarks/peers/grpo_worker.py $1 $M "$P" --steps 5 --warmup 1 --sampler-threads $2 2>&1 | grep -E "^RESULT|^TIME" | python -c "
import sys,json,statistics
for l in sys.stdin:
  if l.startswith('RESULT'):
    r=json.loads(l[7:]); st=r['steps']; print('$1 sampler=$2', 'e2e_med', round(statistics.median(s['completion_tokens']/s['wall_s'] for s in st),1), 'pooled', round(sum(s['completion_tokens'] for s in st)/sum(s['wall_s'] for s in st),1), 'gen', round(statistics.median(s['gen_s'] for s in st),2), 'wait', round(statistics.median(s['gen_wait_s'] for s in st),2), 'upd', round(statistics.median(s['update_s'] for s in st),2), 'parent_cpu/step', round(statistics.median(s['cpu_s'] for s in st),2), end=' ')
  else: print(l.strip())
"
done
uptime
