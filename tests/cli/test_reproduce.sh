#!/usr/bin/env bash
# scripts/reproduce_pylo.sh on the CPU (CPU suite; no GPU needed): the plan (--dry-run), the experiment files
# and the report on fake programs, resume (a done experiment is skipped; --redo, failed, skipped, stopped and
# interrupted ones run again), the deadline, a training experiment started over or resumed, and a multi-GPU
# experiment skipped for want of GPUs; and the training runs' driver, scripts/compare_optimizers.sh: seeds,
# --resume (of the same arguments only), --timeout, and ./report compare on them; the bench scripts' lines
# and refusals; thinned training logs. The fakes stand in for train_vit /
# train_gpt2 / bench_optim / nvidia-smi and print what the real ones print (a header, JSON-lines logs, a
# GPT2_PROFILE table, bench_optim's lines); ./report is the real one (make report).
# Prints PASS/FAIL per check; exits 1 if any fails.
#
#   bash tests/cli/test_reproduce.sh        (make test-cpu runs it)
set -u
cd "$(dirname "$0")/../.." || exit 1
[ -x ./report ] || { echo "FAIL test_reproduce: ./report is missing; make report first"; exit 1; }
T=$(mktemp -d "${TMPDIR:-/tmp}/test_reproduce.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
pass=0 fail=0
check() {  # NAME CONDITION...: PASS when the command succeeds
  local name=$1
  shift
  if "$@"; then echo "PASS $name"; pass=$((pass + 1)); else echo "FAIL $name"; fail=$((fail + 1)); fi
}

# ------------------------------------------------------------------------------------------------ fakes
mkdir -p "$T/bin"
cat >"$T/bin/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
case "$*" in
  *--list-gpus*) for i in 0 1 2 3; do echo "GPU $i: Fake GPU 80GB (UUID: GPU-$i)"; done ;;
  "-i "*name*) echo "Fake GPU $2" ;;
  *name*) echo "Fake GPU 80GB" ;;
  *) exit 1 ;;
esac
EOF
cat >"$T/fake_train" <<'EOF'
#!/usr/bin/env bash
# A training program: header, 8 logged steps, a GPT2_PROFILE table when asked; FAKE_FAIL=1 fails, FAKE_SLEEP waits.
echo "$(basename "$0") $*" >>"$FAKE_CALLS"
[ -z "${FAKE_SLEEP:-}" ] || sleep "$FAKE_SLEEP"
[ "${FAKE_FAIL:-0}" = 1 ] && { echo "train: out of GPU memory; use a smaller -b." >&2; exit 1; }
log="" opt=adamw
while [ $# -gt 0 ]; do case "$1" in --log) log=$2 ;; -o) opt=$2 ;; esac; shift; done
echo "train_vit | Fake GPU 80GB | vit-b16 fused q/k/v bf16, 197 tokens, 86.57M params | $opt"
echo "train_gpt2 | Fake GPU 80GB | d12 separate q/k/v bf16, 124.4M params | $opt"
if [ -n "$log" ]; then
  for s in 1 2 3 4 5 6 7 8; do
    echo "{\"step\":$s,\"loss\":3.0,\"ms\":10.$s,\"opt_ms\":1.5,\"img_per_s\":3000.0,\"tok_per_s\":400000.0,\"mfu\":0.3}" >>"$log"
    [ $((s % 4)) = 0 ] && echo "{\"step\":$s,\"val_loss\":$((10 - s)).5,\"val_top1\":0.$s}" >>"$log"
  done
fi
if [ "${GPT2_PROFILE:-}" = 1 ]; then
  printf 'GPT2_PROFILE: GPU ms per step over 7 steps (total 9.00)\n  fwd attention  3.000  33.3%%\n  bwd attention  5.500  61.1%%\n  crossentropy  0.500  5.6%%\n' >&2
fi
exit 0
EOF
cat >"$T/fake_bench" <<'EOF'
#!/usr/bin/env bash
# bench_optim: --shapes 1 prints two tensors per model; otherwise a copy line and one step line per model x optimizer.
echo "bench_optim $*" >>"$FAKE_CALLS"
[ -z "${FAKE_SLEEP:-}" ] || [ "$*" = "${*%--shapes*}" ] || FAKE_SLEEP=""  # --shapes: at once
[ -z "${FAKE_SLEEP:-}" ] || sleep "$FAKE_SLEEP"
[ "${FAKE_FAIL:-0}" = 1 ] && { echo "bench_optim: needs a CUDA GPU and none is visible." >&2; exit 1; }
models="" opts="adamw" shapes=0
while [ $# -gt 0 ]; do case "$1" in -e) models=$2 ;; -o) opts=$2 ;; --shapes) shapes=$2 ;; esac; shift; done
for m in ${models//,/ }; do
  if [ "$shapes" = 1 ]; then
    echo "{\"model\":\"$m\",\"tensor\":\"w\",\"shape\":[64,64],\"role\":\"hidden\",\"muon\":1}"
    continue
  fi
  for o in ${opts//,/ }; do
    name=${o%%:*} mode=""
    [ "$o" != "$name" ] && mode=",\"mode\":\"${o#*:}\""
    echo "{\"bench\":\"optim_step\",\"gpu\":\"Fake GPU 80GB\",\"model\":\"$m\",\"params\":124439808,\"optimizer\":\"$name\",\"median_ms\":2.5,\"pct_of_floor\":80.0$mode}"
  done
done
EOF
chmod +x "$T/bin/nvidia-smi" "$T/fake_train" "$T/fake_bench"
export PATH="$T/bin:$PATH" FAKE_CALLS="$T/calls" TRAIN_VIT="$T/fake_train" TRAIN_GPT2="$T/fake_train" \
  BENCH_OPTIM="$T/fake_bench" PYLO_SRC="$T/no_pylo"
: >"$FAKE_CALLS"
calls() { wc -l <"$FAKE_CALLS" | tr -d ' '; }
status_of() { tail -n 1 "$1" | sed -n 's/.*"experiment_end":{"status":"\([a-z]*\)".*/\1/p'; }
R=scripts/reproduce_pylo.sh

# ------------------------------------------------------------------------------------------------ the plan
plan=$($R single --quick --dry-run --out "$T/dry" 2>&1)
check plan_exit_0 [ $? = 0 ]
for name in table2_step_breakdown table9_step_throughput fig1_vit_batch_breakdown fig5_optimizer_step_vs_size fig5_peers \
            fig6_synthetic_mlp fig6_peers fig9_matrix_8192 fig9_peers train_vit_fashion_mnist train_gpt2_english \
            fig8_gpt2_schedule_wd fig16_gpt2_qkv configs_smoke; do
  check "plan_lists_$name" grep -q "^# $name: " <<<"$plan"
done
check plan_profiles_table2 grep -q "PROFILE=1 .*bench_vit.sh vit-b16:32" <<<"$plan"
check plan_matrix grep -q -- "-e mat-8192x8192" <<<"$plan"
check plan_mlp_sweep grep -q -- "-e mlp-w256-d1,mlp-w1024-d1,mlp-w4096-d1" <<<"$plan"
check plan_report_step grep -q "report pylo -i $T/dry --out $T/dry" <<<"$plan"
check plan_seeds grep -q -- "--seeds '1 2 3'" <<<"$plan"
# Figure 8: CELO2 with and without weight decay, constant and cosine; Figure 16: q, k, v apart and fused; each
# into a folder of its own.
check plan_fig8_constant_wd grep -q -- "-o celo2 .*-k constant --set celo2.wd=0.1 .*train/gpt2_fig8/celo2_constant_wd_s1.jsonl" <<<"$plan"
check plan_fig8_cosine grep -q -- "-o celo2 .*--set celo2.wd=0 .*train/gpt2_fig8/celo2_cosine_s1.jsonl" <<<"$plan"
check plan_fig16_separate grep -q -- "-o celo2 .*--qkv separate .*train/gpt2_fig16/celo2_separate_s3.jsonl" <<<"$plan"
check plan_fig16_fused grep -q -- "-o adamw .*--qkv fused .*train/gpt2_fig16/adamw_fused_s2.jsonl" <<<"$plan"
check plan_runs_bounded grep -q -- "--timeout 600" <<<"$plan"
# The full configurations: Figures 10-11's other sizes and Figure 16's fused q, k, v, each for 3 steps.
check plan_config_774m grep -q -- "-e d36 -b 16 -t 1024 -d 524288 -k cosine -x 3" <<<"$plan"
check plan_config_fused grep -q -- "-e d24 .*--qkv fused -x 3" <<<"$plan"
check plan_writes_nothing [ ! -e "$T/dry" ]
full=$($R single --dry-run 2>&1)
check plan_full_sizes grep -q -- "-e gpt2-1558m" <<<"$full"
check plan_full_vit_l grep -q "bench_vit.sh vit-l16:32" <<<"$full"
check plan_bad_name_status bash -c "$R single --only nosuch --dry-run >/dev/null 2>&1; [ \$? = 2 ]"
# An absolute --out is noted (the files would record this machine's path); the default, relative, is not.
check plan_absolute_out_noted grep -q "is an absolute path" <<<"$plan"
check plan_relative_out_quiet bash -c "! grep -q 'is an absolute path' <<<\"\$1\"" _ "$full"

# ------------------------------------------------------------------------------------------------ a run
out="$T/out"
only=table2_step_breakdown,fig5_optimizer_step_vs_size,fig5_peers,configs_smoke
$R single --quick --out "$out" --only "$only" >"$T/run1.txt" 2>&1
rc=$?
check run_exit_1_for_skipped_peers [ $rc = 1 ]
f="$out/exp/table2_step_breakdown.jsonl"
check run_table2_file [ -f "$f" ]
check run_table2_ok [ "$(status_of "$f")" = ok ]
check run_table2_header grep -q '"experiment":{"name":"table2_step_breakdown".*"gpu":"Fake GPU 80GB"' "$f"
check run_table2_eight_lines [ "$(grep -c '"fwd_ms":3.0,"bwd_ms":5.5,"loss_ms":0.5' "$f")" = 8 ]
check run_table2_runs [ "$(grep -c '"run":{' "$f")" = 8 ]
check run_peers_skipped [ "$(status_of "$out/exp/fig5_peers.jsonl")" = skipped ]
check run_peers_reason grep -q 'no PyLO source at ' "$out/exp/fig5_peers.jsonl"
check run_fig5_lines [ "$(grep -c '"bench":"optim_step"' "$out/exp/fig5_optimizer_step_vs_size.jsonl")" = 14 ]
check run_configs_notes [ "$(grep -c '"config":{' "$out/exp/configs_smoke.jsonl")" = 5 ]
check run_no_part_left bash -c "! ls '$out/exp/'*.part >/dev/null 2>&1"
check run_report [ -f "$out/report.md" ] 
check run_report_table2 grep -qF '| ViT-B/16 | 32 | AdamW | 3.50 | 5.50 | 1.50 | 10.6 | 17.5 / 38.1 / 4.90 |' "$out/report.md"
check run_report_svg [ -f "$out/table2.svg" ]
check run_no_checkout_paths bash -c "! grep -rlF '$PWD/' '$out/exp/'"  # the commands name paths as given

# ------------------------------------------------------------------------------------------------ resume
before=$(calls)
$R single --quick --out "$out" --only table2_step_breakdown >"$T/run2.txt" 2>&1
check resume_exit_0 [ $? = 0 ]
check resume_skips_done [ "$(calls)" = "$before" ]
check resume_says_so grep -q "table2_step_breakdown is done" "$T/run2.txt"
$R single --quick --out "$out" --only table2_step_breakdown --redo table2_step_breakdown >/dev/null 2>&1
check redo_runs_again [ "$(calls)" -gt "$before" ]
# A failed experiment (every run failed) runs again on the next call; an interrupted one (.part) too.
FAKE_FAIL=1 $R single --quick --out "$out" --only fig9_matrix_8192 >/dev/null 2>&1
check failed_status [ "$(status_of "$out/exp/fig9_matrix_8192.jsonl")" = failed ]
$R single --quick --out "$out" --only fig9_matrix_8192 >/dev/null 2>&1
check failed_runs_again [ "$(status_of "$out/exp/fig9_matrix_8192.jsonl")" = ok ]
rm -f "$out/exp/fig6_synthetic_mlp.jsonl"
echo '{"experiment":{"name":"fig6_synthetic_mlp"}}' >"$out/exp/fig6_synthetic_mlp.jsonl.part"
$R single --quick --out "$out" --only fig6_synthetic_mlp >/dev/null 2>&1
check interrupted_runs_again [ "$(status_of "$out/exp/fig6_synthetic_mlp.jsonl")" = ok ]
check interrupted_part_gone [ ! -e "$out/exp/fig6_synthetic_mlp.jsonl.part" ]
# A skipped experiment runs again once its prerequisite is there.
mkdir -p "$T/pylo/pylo"
before=$(calls)
PYLO_SRC="$T/pylo" PYTHON=true $R single --quick --out "$out" --only fig5_peers >/dev/null 2>&1
check skipped_runs_again [ "$(status_of "$out/exp/fig5_peers.jsonl")" = ok ]
check skipped_peer_shapes [ "$(calls)" -gt "$before" ]

# ------------------------------------------------------------------------------------------------ the deadline
# A run that ends past the deadline stops its experiment (the runs after it are recorded as not started) ...
FAKE_SLEEP=2.1 COMMIT=old1111 $R single --quick --out "$out" --only table2_step_breakdown --redo table2_step_breakdown \
  --deadline 2 >"$T/run3.txt" 2>&1
check deadline_exit_1 [ $? = 1 ]
check run_names_commit grep -q '"run":{.*"exit":0,.*"commit":"old1111"}}' "$out/exp/table2_step_breakdown.jsonl"
check deadline_stopped [ "$(status_of "$out/exp/table2_step_breakdown.jsonl")" = stopped ]
check deadline_skipped_runs [ "$(grep -c '"skipped":"the deadline"' "$out/exp/table2_step_breakdown.jsonl")" = 7 ]
# ... and no experiment starts after it; the next call goes on.
FAKE_SLEEP=2.1 $R single --quick --out "$T/out2" --only fig9_matrix_8192,fig6_synthetic_mlp --deadline 2 >"$T/run4.txt" 2>&1
check deadline_first_done [ "$(status_of "$T/out2/exp/fig6_synthetic_mlp.jsonl")" = ok ]  # the plan's order
check deadline_leaves_rest [ ! -e "$T/out2/exp/fig9_matrix_8192.jsonl" ]
check deadline_says_so grep -q "run the same command again" "$T/run4.txt"
# The next call goes on where the stopped one ended: the run that ended is kept, the seven others run.
# Its run lines name the commit each ran at; one written before they did takes its file's header's.
before=$(calls)
f="$out/exp/table2_step_breakdown.jsonl"
sed -i 's/,"commit":"old1111"}}$/}}/' "$f"
COMMIT=new2222 $R single --quick --out "$out" --only table2_step_breakdown >"$T/run5.txt" 2>&1
check carried_run_keeps_its_commit [ "$(grep -c '"run":{.*"commit":"old1111"}}' "$f")" = 1 ]
check new_runs_name_theirs [ "$(grep -c '"run":{.*"commit":"new2222"}}' "$f")" = 7 ]
check stopped_runs_again [ "$(status_of "$f")" = ok ]
check stopped_goes_on [ $(($(calls) - before)) = 7 ]
check stopped_says_so grep -q "goes on after the 1 runs that ended" "$T/run5.txt"
check stopped_keeps_every_line [ "$(grep -c '"fwd_ms":3.0,"bwd_ms":5.5,"loss_ms":0.5' "$f")" = 8 ]
check stopped_runs_recorded [ "$(grep -c '"run":{.*"exit":0,' "$f")" = 8 ]
check stopped_no_skipped_left [ "$(grep -c '"skipped"' "$f")" = 0 ]
check stopped_time_counts_the_carried_run awk -v w="$(tail -n 1 "$f" | sed -n 's/.*"wall_s":\([0-9.]*\).*/\1/p')" \
  'BEGIN { exit !(w >= 2.1) }'  # the first call's run slept 2.1 s; this call's runs do not sleep
# A stopped experiment of another GPU starts over.
FAKE_SLEEP=2.1 $R single --quick --out "$out" --only table2_step_breakdown --redo table2_step_breakdown --deadline 2 \
  >/dev/null 2>&1
sed -i '1s/"gpu":"Fake GPU 80GB"/"gpu":"Other GPU"/' "$f"
before=$(calls)
$R single --quick --out "$out" --only table2_step_breakdown >"$T/run6.txt" 2>&1
check other_gpu_starts_over [ $(($(calls) - before)) = 8 ]
check other_gpu_says_so grep -q "stopped on another kind of GPU" "$T/run6.txt"
check other_gpu_ok [ "$(status_of "$f")" = ok ]
# A run that the deadline cuts short is no result: it is recorded as such and runs again in the next call
# (the deadline leaves a run at least 30 s).
FAKE_SLEEP=32 $R single --quick --out "$out" --only fig9_matrix_8192 --redo fig9_matrix_8192 --deadline 1 \
  >/dev/null 2>&1
f="$out/exp/fig9_matrix_8192.jsonl"
check cut_stopped [ "$(status_of "$f")" = stopped ]
check cut_recorded grep -q '"exit":null,.*"skipped":"cut short by the deadline"' "$f"
check cut_no_lines [ "$(grep -c '"bench":"optim_step"' "$f")" = 0 ]
before=$(calls)
COMMIT=abc1234 $R single --quick --out "$out" --only fig9_matrix_8192 >/dev/null 2>&1
check cut_runs_again [ "$(status_of "$f")" = ok ]
check commit_given grep -q '"commit":"abc1234",' "$f"
check cut_ran_once_more [ $(($(calls) - before)) = 1 ]
check cut_time_counts awk -v w="$(tail -n 1 "$f" | sed -n 's/.*"wall_s":\([0-9.]*\).*/\1/p')" \
  'BEGIN { exit !(w >= 30) }'  # the 30 s of the cut run were spent; the run of this call does not sleep
# A pass given one GPU of four (CUDA_VISIBLE_DEVICES) names that GPU and counts one.
CUDA_VISIBLE_DEVICES=2 $R single --quick --out "$T/gpu2" --only fig9_matrix_8192 >/dev/null 2>&1
check visible_gpu_named grep -q '"gpu":"Fake GPU 2","gpus":1,' "$T/gpu2/exp/fig9_matrix_8192.jsonl"

# ------------------------------------------------------------------------------------------------ compare
printf 'common -b 8\nadamw_lr1e-3 adamw -l 1e-3\nmuon_lr0.01 muon --set muon.lr=0.01\n' >"$T/c.cfg"
C=(scripts/compare_optimizers.sh vit --cfg "$T/c.cfg" --steps 8 --seeds "1 2 3" --logdir "$T/cmp" --extra "-i x" --no-build)
: >"$FAKE_CALLS"
"${C[@]}" --timeout 30 >/dev/null 2>&1
check compare_exit_0 [ $? = 0 ]
check compare_six_logs [ "$(ls "$T/cmp/"*.jsonl | wc -l)" = 6 ]
check compare_six_runs [ "$(calls)" = 6 ]
check compare_ends_ok [ "$(grep -l '"compare_end":{"status":"ok"' "$T/cmp/"*.jsonl | wc -l)" = 6 ]
"${C[@]}" --resume >/dev/null 2>&1
check compare_resume_skips [ "$(calls)" = 6 ]
rm "$T/cmp/muon_lr0.01_s2.jsonl"
FAKE_SLEEP=3 "${C[@]}" --resume --timeout 1 >/dev/null 2>&1
check compare_timeout_exit_1 [ $? = 1 ]
check compare_timeout_status grep -q '"compare_end":{"status":"timeout","exit":124' "$T/cmp/muon_lr0.01_s2.jsonl"
check compare_timeout_only_missing [ "$(calls)" = 7 ]
./report compare -i "$T/cmp" --out "$T/cmp_table" --task vit >/dev/null
check compare_table_seeds grep -qF '| adamw_lr1e-3 | adamw | 1e-3 | 1 2 3 | 2.5000 ± 0.0000 |' "$T/cmp_table.md"
check compare_table_timeout grep -qF '| timeout 1/3 |' "$T/cmp_table.md"
check compare_svg [ -s "$T/cmp_table.svg" ]

# The logs thinned for committing (scripts/thin_train_logs.sh) give the same table; a step with a loss that is
# not a number, the last step and every Nth stay.
cp -r "$T/cmp" "$T/cmp_thin"
scripts/thin_train_logs.sh 4 "$T/cmp_thin/"*.jsonl
check thin_exit_0 [ $? = 0 ]
check thin_fewer_lines [ "$(cat "$T/cmp_thin/"*.jsonl | wc -l)" -lt "$(cat "$T/cmp/"*.jsonl | wc -l)" ]
./report compare -i "$T/cmp_thin" --out "$T/cmp_thin_table" --task vit >/dev/null
check thin_same_table cmp -s "$T/cmp_table.md" "$T/cmp_thin_table.md"
{ echo '{"compare_run":{"task":"vit","label":"x","optimizer":"adamw","flags":"","seed":1,"steps":7}}'
  for s in 1 2 3 4 5 6 7; do
    [ $s = 3 ] && echo '{"step":3,"loss":null,"ms":1.0}' || echo "{\"step\":$s,\"loss\":2.5,\"ms\":1.0}"
  done
  echo '{"step":7,"val_loss":2.0}'
  echo '{"compare_end":{"status":"diverged","exit":1,"wall_s":1.0}}'; } >"$T/thin.jsonl"
scripts/thin_train_logs.sh 4 "$T/thin.jsonl"
check thin_kept_steps [ "$(grep -o '^{"step":[0-9]*,"loss"' "$T/thin.jsonl" | tr -dc '0-9\n' | tr '\n' ' ')" = "3 4 7 " ]
check thin_kept_others [ "$(grep -c 'compare_run\|compare_end\|val_loss' "$T/thin.jsonl")" = 3 ]
scripts/thin_train_logs.sh 0 "$T/thin.jsonl" 2>/dev/null
check thin_bad_n [ $? = 2 ]

# --resume keeps a log only of the same arguments: with other data every run trains again; with the same, only
# the one that timed out.
for x in same other; do
  cp -r "$T/cmp" "$T/cmp_$x"
  before=$(calls)
  extra=()
  [ $x = same ] || extra=(--extra "-i y")
  "${C[@]}" --logdir "$T/cmp_$x" --resume "${extra[@]}" >"$T/cmp_$x.txt" 2>&1
  echo $(($(calls) - before)) >"$T/cmp_$x.n"
done
check compare_resume_same_args [ "$(cat "$T/cmp_same.n")" = 1 ]
check compare_resume_other_args [ "$(cat "$T/cmp_other.n")" = 6 ]
check compare_resume_says_so grep -q "is the log of other arguments" "$T/cmp_other.txt"

# ------------------------------------------------------------------------------------------------ training
# A training experiment that starts over (--redo, or stopped with other settings) trains every run again and
# keeps no log of before; one that goes on with the same settings keeps its ended runs. In a copy of the
# checkout (links) with KJV shards of its own, since a fresh clone has no corpus.
mkdir -p "$T/repo/data/kjv"
for e in "$PWD"/*; do [ "$(basename "$e")" = data ] || ln -s "$e" "$T/repo/"; done
: >"$T/repo/data/kjv/kjv_train_000001.bin"
: >"$T/repo/data/kjv/kjv_val_000000.bin"
f="$T/tr/exp/train_gpt2_english.jsonl" logs="$T/tr/train/gpt2"
train_again() {  # ARGS...: the experiment once more; prints how many runs trained
  local before
  before=$(calls)
  (cd "$T/repo" && COMMIT=t1 scripts/reproduce_pylo.sh single --quick --out "$T/tr" --only train_gpt2_english \
    --no-report "$@" >"$T/tr.txt" 2>&1)
  echo $(($(calls) - before))
}
n=$(train_again)
check train_ok [ "$(status_of "$f")" = ok ]
check train_on_kjv grep -q '"corpus":"kjv"' "$f"
check train_runs [ "$n" -ge 6 ]  # AdamW, Muon and CELO2 (its weights ship with the code), 3 seeds
check train_logs [ "$(ls "$logs"/*.jsonl | wc -l)" = "$n" ]
echo '{"compare_end":{"status":"ok","exit":0,"wall_s":1.0}}' >"$logs/velo_s1.jsonl"  # a log of an earlier start
check train_redo_trains_all [ "$(train_again --redo train_gpt2_english)" = "$n" ]
check train_redo_clears [ ! -e "$logs/velo_s1.jsonl" ]
stop_it() {  # SED: the experiment's file as a call stopped by the deadline leaves it, then edited by SED
  sed -i -e 's/"exit":0,/"exit":null,/' -e 's/"status":"ok"/"status":"stopped"/' -e "$1" "$f"
}
stop_it ''
check train_goes_on [ "$(train_again)" = 0 ]
check train_goes_on_ok [ "$(status_of "$f")" = ok ]
stop_it '1s/"corpus":"kjv"/"corpus":"english"/'
check train_other_settings_start_over [ "$(train_again)" = "$n" ]
check train_other_settings_say_so grep -q "stopped with other settings" "$T/tr.txt"
# The full pass trains GPT-2 only on the English corpus: 800 steps would go over the KJV six times.
(cd "$T/repo" && COMMIT=t1 scripts/reproduce_pylo.sh single --out "$T/trfull" --only train_gpt2_english \
  --no-report >/dev/null 2>&1)
check train_full_needs_english [ "$(status_of "$T/trfull/exp/train_gpt2_english.jsonl")" = skipped ]
check train_full_says_why grep -q 'no data at data/english/english_train_' "$T/trfull/exp/train_gpt2_english.jsonl"

# ------------------------------------------------------------------------------------------------ multi
WORLD=8 $R multi --quick --out "$T/multi" >/dev/null 2>&1
check multi_skipped [ "$(status_of "$T/multi/exp/table3_data_parallel.jsonl")" = skipped ]
check multi_reason grep -q "fewer than WORLD=8" "$T/multi/exp/table3_data_parallel.jsonl"
check multi_report_section grep -q "^## Table 3" "$T/multi/report.md"
check multi_report_no_single bash -c "! grep -q '^## Table 2' '$T/multi/report.md'"

# ------------------------------------------------------------------------------------------------ the bench scripts
# scripts/bench_gpt2.sh and bench_vit.sh (on scripts/bench_common.sh), which the speed experiments run: one
# line per configuration from ./report median, MODEL:B:T, a launcher's id file, OUTFILE, a failed run's line,
# and the settings they refuse.
: >"$FAKE_CALLS"
line=$(STEPS=6 WARMUP=2 scripts/bench_gpt2.sh d12:4:512 2>/dev/null)
check bench_gpt2_line grep -q '^{"model":"d12",.*"B":4,"T":512,.*"tok_per_s":400000' <<<"$line"
check bench_gpt2_command grep -q -- "-e d12 -b 4 -t 512 -x 6 -v 0 -s 0 -o adamw --log " "$FAKE_CALLS"
line=$(LAUNCH=env OUTFILE="${T#$PWD/}/bench_out/vit.jsonl" scripts/bench_vit.sh vit-s16:8 2>/dev/null)
check bench_vit_line grep -q '^{"model":"vit-s16",.*"B":8,.*"img_per_s":3000' <<<"$line"
check bench_vit_launch grep -q '"launch":"env"' <<<"$line"
check bench_vit_nccl_id grep -q -- "-o adamw --log .* --nccl-id-file " "$FAKE_CALLS"
check bench_vit_outfile [ "$(cat "$T/bench_out/vit.jsonl")" = "$line" ]
line=$(FAKE_FAIL=1 scripts/bench_vit.sh vit-b16:32 2>/dev/null)
check bench_failed_run_line grep -q '"error":"train: out of GPU memory; use a smaller -b."' <<<"$line"
bench_refuses() {  # NAME MESSAGE ENV... -- ARGS...: exit status 2 with MESSAGE on stderr
  local name=$1 msg=$2 envs=()
  shift 2
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$@" >/dev/null 2>"$T/bench_err"
  check "bench_refuses_$name" bash -c "[ $? = 2 ] && grep -qF \"\$1\" '$T/bench_err'" _ "$msg"
}
bench_refuses steps "STEPS and WARMUP must be whole numbers (got 'x')" STEPS=x -- scripts/bench_gpt2.sh d12:4
bench_refuses seq_len "T must be a whole number (got 'x')" T=x -- scripts/bench_gpt2.sh d12:4
bench_refuses warmup "STEPS (3) must be larger than WARMUP (3)" STEPS=3 WARMUP=3 -- scripts/bench_vit.sh vit-b16:32
bench_refuses timeout "TIMEOUT must be a whole number of seconds (got '0')" TIMEOUT=0 -- scripts/bench_vit.sh vit-b16:32
bench_refuses config "bad configuration 'd12'" X=1 -- scripts/bench_gpt2.sh d12
bench_refuses vit_config "bad configuration 'd12:4'" X=1 -- scripts/bench_vit.sh d12:4
bench_refuses program "not found; build it with 'make train_gpt2'" TRAIN_GPT2="$T/none" -- scripts/bench_gpt2.sh d12:4
bench_refuses report "not found; build it with 'make report'" REPORT="$T/none" -- scripts/bench_vit.sh vit-b16:32

echo "test_reproduce: $pass passed, $fail failed"
[ $fail = 0 ]
