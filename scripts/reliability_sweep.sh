#!/usr/bin/env bash
# Re-runs the hostile cases of the third reliability sweep (issue 32) that a command line can show, against a
# build, and prints one row per case: its name, the exit status and the last line the user sees. The cases that
# need fault injection (F2: a kill between checkpoint and records), mpirun (F6, F7) or a remote worker (F21) are
# ctest cases; their names are printed at the end. Nothing here writes outside a temporary folder.
#   scripts/reliability_sweep.sh [BUILD_DIR]      (default build/; about 30 s on 2 cores)
set -uo pipefail
cd "$(dirname "$0")/.."
rlcpp=$(realpath "${1:-build}")/rlcpp
[ -x "$rlcpp" ] || { echo "reliability_sweep: no rlcpp in ${1:-build} (build it first)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cases=0 good=0

# case NAME EXPECT COMMAND...: EXPECT is "fail" (must exit non-zero with a message) or "ok"; the row shows what the
# user sees: the first error line (else the first line of stderr, else the last of stdout), cut to 150 characters.
case_() {
  local name=$1 expect=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
  local rc=$?
  local seen
  seen=$(grep -m1 'error' "$tmp/err")
  [ -n "$seen" ] || seen=$(grep -m1 -v '^\s*$' "$tmp/err")
  [ -n "$seen" ] || seen=$(grep -v '^\s*$' "$tmp/out" | tail -1)
  local verdict=ok
  if [ "$expect" = fail ]; then ((rc != 0)) && ! grep -q 'unexpected error' "$tmp/err" || verdict=WRONG
  else ((rc == 0)) || verdict=WRONG; fi
  ((cases += 1)); [ $verdict = ok ] && ((good += 1))
  printf '%-6s %-58s rc %-3s %s\n' "$verdict" "$name" "$rc" "${seen:0:150}"
}

"$rlcpp" sft configs/sft_add3.json --set steps=2 --set eval_every=0 --set run_dir="$tmp/sft" >/dev/null 2>&1 ||
  { echo "reliability_sweep: the short SFT run that makes the checkpoint failed" >&2; exit 1; }
ck="$tmp/ck"
cp -a "$tmp/sft/checkpoints/step_2" "$ck"
cp tests/data/qwen3/tokenizer.json "$tmp/qwen3.json"
sum_before=$(sha256sum "$ck"/* | sha256sum)

echo "== F1 outputs onto inputs"
case_ "generate --out CK/model.safetensors" fail "$rlcpp" generate "$ck" --prompt 1+2= --out "$ck/model.safetensors"
echo '{"text": "1+2=3"}' >"$tmp/in.jsonl"
case_ "score --out CK/config.json" fail "$rlcpp" score "$ck" --input "$tmp/in.jsonl" --out "$ck/config.json"
case_ "score --out its own --input" fail "$rlcpp" score "$ck" --input "$tmp/in.jsonl" --out "$tmp/in.jsonl"
case_ "  the checkpoint is unchanged" ok test "$(sha256sum "$ck"/* | sha256sum)" = "$sum_before"

echo "== F3 failed writes"
case_ "generate --out /dev/full" fail "$rlcpp" generate "$ck" --prompt 1+2= --out /dev/full
case_ "score to a full standard output" fail bash -c "'$rlcpp' score '$ck' --input '$tmp/in.jsonl' >/dev/full"
case_ "config to a full standard output" fail bash -c "'$rlcpp' config >/dev/full"
echo '{"text": "hi"}' >"$tmp/tok.jsonl"
case_ "tokenize to a full standard output" fail bash -c "'$rlcpp' tokenize '$tmp/qwen3.json' --input '$tmp/tok.jsonl' >/dev/full"

echo "== F5 inputs that are no regular file"
ln -s /dev/zero "$tmp/zero.json"
mkfifo "$tmp/fifo.jsonl"
case_ "train config -> /dev/zero" fail timeout 20 "$rlcpp" train "$tmp/zero.json"
case_ "generate --prompts FIFO" fail timeout 20 "$rlcpp" generate "$ck" --prompts "$tmp/fifo.jsonl"
case_ "generate --tokenizer /dev/zero" fail timeout 20 "$rlcpp" generate "$ck" --prompt 1 --tokenizer "$tmp/zero.json"

echo "== F8-F11, F22 remote rewards, ports, workers"
case_ "reward.remote.timeout_ms=9e12" fail "$rlcpp" train configs/grpo_add3.json --set run_dir="$tmp/r1" \
  --set reward.type=remote --set reward.remote.timeout_ms=9000000000000
case_ "reward.remote.retries=-1 (before the warm start)" fail timeout 20 "$rlcpp" train configs/grpo_add3.json \
  --set run_dir="$tmp/r2" --set reward.type=remote --set reward.remote.retries=-1
case_ "reward.remote.endpoint=foo" fail timeout 20 "$rlcpp" train configs/grpo_add3.json --set run_dir="$tmp/r3" \
  --set reward.type=remote --set reward.remote.endpoint=foo
case_ "worker --connect port 70000" fail timeout 20 "$rlcpp" worker "$ck" --connect tcp://127.0.0.1:70000
case_ "one worker listed twice (127.0.0.1, localhost)" fail timeout 20 "$rlcpp" train configs/grpo_add3.json \
  --set run_dir="$tmp/r4" --set rollout.placement=remote \
  --set 'rollout.remote.endpoints=["tcp://127.0.0.1:5701","tcp://localhost:5701"]' \
  --set 'rollout.remote.weights_endpoints=["tcp://127.0.0.1:5702","tcp://127.0.0.1:5703"]'

echo "== F12, F13 tokenizer Split patterns"
python3 - "$tmp" <<'EOF'
import json, sys
tmp = sys.argv[1]
tok = json.load(open(f"{tmp}/qwen3.json"))
for name, pattern in (("empty", {"Regex": ""}), ("star", {"Regex": "x*"}), ("literal", {"String": " "})):
    split = {"type": "Split", "pattern": pattern, "behavior": "Isolated", "invert": False}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    tok["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [split, byte_level]}
    json.dump(tok, open(f"{tmp}/split_{name}.json", "w"))
EOF
echo '{"text": "hello world"}' >"$tmp/hello.jsonl"
for name in empty star literal; do
  case_ "Split {$name} pattern tokenizes" ok "$rlcpp" tokenize "$tmp/split_$name.json" --input "$tmp/hello.jsonl"
done

echo "== F14 a model of 2^22 positions"
python3 - "$ck" "$tmp/long" <<'EOF'
import json, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
shutil.copytree(src, dst)
cfg = json.load(open(f"{dst}/config.json"))
cfg["max_position_embeddings"] = 4194304
json.dump(cfg, open(f"{dst}/config.json", "w"))
EOF
case_ "generate, 4 tokens, under 20 s" ok timeout 20 "$rlcpp" generate "$tmp/long" --prompt 1+2= --max-new-tokens 4
case_ "  worker --max-context 64 accepted" ok timeout 5 bash -c \
  "'$rlcpp' worker '$tmp/long' --max-context 64 --bind tcp://127.0.0.1:0 --help >/dev/null"

echo "== F15 numbers reported as written"
case_ "--temperature 1e308" fail "$rlcpp" generate "$ck" --prompt 1+2= --temperature 1e308
case_ "--top-p 1e-300" fail "$rlcpp" generate "$ck" --prompt 1+2= --top-p 1e-300
python3 - "$ck" "$tmp/theta" <<'EOF'
import json, shutil, sys
shutil.copytree(sys.argv[1], sys.argv[2])
cfg = json.load(open(f"{sys.argv[2]}/config.json"))
cfg["rope_theta"] = 1e-300
json.dump(cfg, open(f"{sys.argv[2]}/config.json", "w"))
EOF
case_ "config.json rope_theta=1e-300" fail "$rlcpp" generate "$tmp/theta" --prompt 1+2=

echo "== F16, F17 prompts"
case_ "generate --prompt ''" ok "$rlcpp" generate "$ck" --prompt "" --max-new-tokens 2
case_ "generate --prompt '1+é='" fail "$rlcpp" generate "$ck" --prompt "1+é="

echo "== F18, F19 resume over bad run files"
"$rlcpp" train configs/grpo_add3.json --set run_dir="$tmp/run" --set warm_start.enabled=false \
  --set init_checkpoint="$ck" --set steps=2 --set checkpoint_every=1 --set eval_every=0 >/dev/null 2>&1
rm -rf "$tmp/run/checkpoints/step_2"  # a run stopped after step 1's checkpoint: resume goes on from there
cp -a "$tmp/run" "$tmp/run_b"
rm "$tmp/run/metrics.jsonl" && mkdir "$tmp/run/metrics.jsonl"
case_ "resume, metrics.jsonl a directory" fail "$rlcpp" train --resume "$tmp/run"
mkdir -p "$tmp/run_b/checkpoints/step_99999999999999999999"
# A folder named no step number is no checkpoint: the resume passes it by and goes on from step_1.
case_ "resume beside checkpoints/step_99999999999999999999" ok "$rlcpp" train --resume "$tmp/run_b"

echo "== F20 key files"
mkdir "$tmp/keydir"
"$rlcpp" keys "$tmp/w0" >/dev/null 2>&1
ln -s /dev/zero "$tmp/zero.key"
for key in "$tmp/keydir" "$tmp/zero.key" "$tmp/w0.pub"; do
  case_ "worker --curve-key $(basename "$key")" fail timeout 20 "$rlcpp" worker "$ck" --bind tcp://127.0.0.1:0 \
    --curve-key "$key"
done

echo "== F23 impossible records"
for bad in '3.5' '-3' '9223372036854775807'; do
  mkdir -p "$tmp/rec_$bad"
  cp "$tmp/run_b/config.json" "$tmp/rec_$bad/"
  sed "s/\"step\": *1,/\"step\": $bad,/" "$tmp/run_b/metrics.jsonl" >"$tmp/rec_$bad/metrics.jsonl"
  case_ "report, step $bad" fail "$rlcpp" report "$tmp/rec_$bad"
done
mkdir -p "$tmp/rec_dup" && cp "$tmp/run_b/config.json" "$tmp/rec_dup/"
cat "$tmp/run_b/metrics.jsonl" "$tmp/run_b/metrics.jsonl" >"$tmp/rec_dup/metrics.jsonl"
case_ "report, a step twice" fail "$rlcpp" report "$tmp/rec_dup"

echo
echo "$good of $cases cases as expected"
echo "in ctest: F2 TrainSplit.AKillRightAfterACheckpointLosesNoneOfItsStepsRecords, F4 InputChecks.ScoreStreams*,"
echo "          F6/F7 TrainDataParallel.ARankThatStops*, .RanksWithAnotherConfig*, F21 LoopResume.PendingRolloutsOfAnother*"
echo "          run: ctest --test-dir build -R 'AKillRightAfter|ScoreStreams|TrainDataParallel|PendingRolloutsOfAnother'"
((good == cases))
