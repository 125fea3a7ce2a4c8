# The PyLO paper's experiments, in the order they run: sourced by scripts/reproduce_pylo.sh after its
# settings, the experiment files' functions (reproduce_lib.sh) and the prerequisites' checks.
# shellcheck shell=bash
all_opts="adamw adafactor muon small_fc_lopt small_fc_lopt:fast velo celo2 elo elo_celo2"
if [ $quick = 1 ]; then
  vits="vit-b16" gpt2s="d12" bench_steps=10
  t2_opts="adamw adafactor small_fc_lopt:fast velo"
  t9_opts="adamw small_fc_lopt:fast velo"
  f1_batches="128" f1_opts="adamw velo"  # with batch 32 from table2_step_breakdown (the report takes it)
  f5_models="gpt2-124m gpt2-355m" f5_opts="adamw,adafactor,muon,small_fc_lopt,small_fc_lopt:fast,velo,celo2"
  f5_peer_models="vit-b16,gpt2-124m"  # one run of the peer script for both
  f5_peers="pylo_cuda:small_fc_lopt,pylo_naive:small_fc_lopt,pylo_naive:velo,torch:adamw,torch:adafactor,torch:muon"
  f6_models="mlp-w256-d1 mlp-w1024-d1 mlp-w4096-d1 mlp-w256-d4 mlp-w256-d16 mlp-w4096-d4"
  f6_peers="pylo_cuda:small_fc_lopt,pylo_naive:small_fc_lopt" f6_peer_groups=$(echo $f6_models | tr ' ' ,)
  f9_peers="pylo_cuda:small_fc_lopt,pylo_naive:small_fc_lopt,torch:adamw,torch:muon"
  seeds="1 2 3" vit_steps=300 gpt2_steps=60 peer_steps=5 peer_budget=10 peer_limit=240
  vit_extra="-v 100" gpt2_extra="-v 20"  # few validations
  smoke_opts="celo2"
else
  vits="vit-s16 vit-b16 vit-l16" gpt2s="d12 d24 d36 d48" bench_steps=15
  t2_opts=$all_opts t9_opts=$all_opts
  f1_batches="8 16 32 64 128 256" f1_opts="adamw adafactor small_fc_lopt:fast velo"
  f5_models="vit-s16 vit-b16 vit-l16 gpt2-124m gpt2-355m gpt2-774m gpt2-1558m"
  f5_opts="adamw,adafactor,muon,small_fc_lopt,small_fc_lopt:fast,velo,celo2,elo,elo:fast,elo_celo2"
  f5_peer_models=$f5_models
  f5_peers="pylo_cuda:small_fc_lopt,pylo_cuda:velo,pylo_naive:small_fc_lopt,pylo_naive:velo,torch:adamw,torch:adamw_foreach,torch:adafactor,torch:muon"
  f6_models="mlp-w128-d1 mlp-w256-d1 mlp-w512-d1 mlp-w1024-d1 mlp-w2048-d1 mlp-w4096-d1 mlp-w8192-d1
    mlp-w256-d2 mlp-w256-d4 mlp-w256-d8 mlp-w256-d16 mlp-w256-d32 mlp-w4096-d2 mlp-w4096-d4 mlp-w4096-d8"
  f6_peers="pylo_cuda:small_fc_lopt,pylo_naive:small_fc_lopt,pylo_cuda:velo,pylo_naive:velo" f6_peer_groups=$f6_models
  f9_peers="pylo_cuda:small_fc_lopt,pylo_cuda:velo,pylo_cuda:celo2,pylo_naive:small_fc_lopt,pylo_naive:velo,pylo_naive:celo2,torch:adamw,torch:muon"
  seeds="1 2 3" vit_steps=9400 gpt2_steps=800 peer_steps=10 peer_budget=60 peer_limit=$limit
  vit_extra="" gpt2_extra=""
  smoke_opts="adamw muon velo small_fc_lopt celo2"
fi

# peers GROUPS RUNS: the PyLO / torch (and for VeLO, JAX) peers on bench_optim's shapes (--shapes 1, no GPU)
# of each group of models (a comma-separated list: one run of the peer script for all of them).
peers() {
  local groups=$1 runs_list=$2 g problem shapes
  problem=$(peer_problem)
  if [ -n "$problem" ]; then skip "$problem"; return; fi
  for g in $groups; do
    shapes="$log_dir/shapes_$name.jsonl"
    if [ $dry = 1 ]; then
      echo "$(cmdline "$bench_optim" -e "$g" --shapes 1) > $shapes"
    else
      "$bench_optim" -e "$g" --shapes 1 >"$shapes" 2>>"$log" || echo "reproduce_pylo: no shapes for $g" >&2
    fi
    run --limit "$peer_limit" "$python" bench/pylo_step_bench.py --shapes "$shapes" --pylo "$pylo_src" --run "$runs_list" \
      --steps "$peer_steps" --budget "$peer_budget"
    if [[ "$runs_list" == *velo* ]]; then run "$python" bench/jax_velo_bench.py --shapes "$shapes" --steps "$peer_steps"; fi
  done
  finish
}

# Each optimizer of $1 on every ViT at batch 32 and every GPT-2 at 4 x 1024 tokens; $2: PROFILE=1 for the
# forward / backward split, or nothing.
bench_models() {
  local o m
  for o in $1; do
    for m in $vits; do
      run env STEPS=$bench_steps ${2:-} TIMEOUT="$limit" TRAIN_VIT="$train_vit" REPORT="$report" \
        EXTRA="$(opt_flags "$o")" scripts/bench_vit.sh "$m:32"
    done
    for m in $gpt2s; do
      run env STEPS=$bench_steps ${2:-} TIMEOUT="$limit" TRAIN_GPT2="$train_gpt2" REPORT="$report" \
        EXTRA="$(opt_flags "$o")" scripts/bench_gpt2.sh "$m:4"
    done
  done
}

if [ "$kind" = single ]; then
  if begin setup_pylo_cuda "PyLO's CUDA extensions, built in its source folder for the peers"; then
    problem=$(peer_problem)
    if [ -n "$problem" ]; then
      skip "$problem"
    elif [ $dry = 0 ] && pylo_cuda_built; then
      note '{"setup":"PyLO CUDA extensions already built"}'
      finish
    else
      run bash -c "cd $(quote "$pylo_src") && PYLO_CUDA=1 $python setup.py build_ext --inplace"
      finish
    fi
  fi

  if begin table2_step_breakdown "Table 2: forward, backward and optimizer time per step, ViT at batch 32, GPT-2 at 4 x 1024 tokens" \
       "models=$vits $gpt2s" "optimizers=$t2_opts"; then
    bench_models "$t2_opts" PROFILE=1
    finish
  fi

  if begin table9_step_throughput "Table 9: training step and throughput, ViT at batch 32, GPT-2 at 4 x 1024 tokens" \
       "models=$vits $gpt2s" "optimizers=$t9_opts"; then
    bench_models "$t9_opts"
    finish
  fi

  if begin fig1_vit_batch_breakdown "Figure 1: ViT-B/16 step breakdown across batch sizes" \
       "batches=$f1_batches" "optimizers=$f1_opts"; then
    for b in $f1_batches; do
      for o in $f1_opts; do
        run env STEPS=$bench_steps PROFILE=1 TIMEOUT="$limit" TRAIN_VIT="$train_vit" REPORT="$report" \
          EXTRA="$(opt_flags "$o")" scripts/bench_vit.sh "vit-b16:$b"
      done
    done
    finish
  fi

  if begin fig5_optimizer_step_vs_size "Figure 5: optimizer step time against model size (ours)" "models=$f5_models"; then
    for m in $f5_models; do run "$bench_optim" -e "$m" -o "$f5_opts" -x 20; done
    finish
  fi
  if begin fig5_peers "Figure 5: optimizer step time against model size (PyLO, torch, JAX on the same shapes)" \
       "models=$f5_peer_models"; then
    peers "$f5_peer_models" "$f5_peers"
  fi

  if begin fig6_synthetic_mlp "Figure 6: learned optimizer step on synthetic MLPs (width and depth sweeps)" \
       "models=$(echo $f6_models)"; then
    run "$bench_optim" -e "$(echo $f6_models | tr ' ' ,)" -o small_fc_lopt,small_fc_lopt:fast,velo -x 20
    finish
  fi
  if begin fig6_peers "Figure 6: PyLO's CUDA and naive steps on the same MLPs" "models=$(echo $f6_models)"; then
    peers "$f6_peer_groups" "$f6_peers"
  fi

  if begin fig9_matrix_8192 "Figure 9: optimizer step on one 8192 x 8192 matrix (ours)"; then
    run "$bench_optim" -e mat-8192x8192 -o adamw,adafactor,muon,small_fc_lopt,small_fc_lopt:fast,velo,celo2,elo_celo2 -x 20
    finish
  fi
  if begin fig9_peers "Figure 9: PyLO and torch on the same 8192 x 8192 matrix"; then
    peers mat-8192x8192 "$f9_peers"
  fi

  # The scaled-down training runs: every configuration of the .cfg whose weights are here, SEEDS seeds each.
  train() {  # TASK CFG STEPS DATA_GLOB DATA_HINT [EXTRA [LOGDIR: under DIR/train/, default TASK]]
    local task=$1 cfg=$2 steps=$3 glob=$4 hint=$5 extra=${6:-} sub=${7:-$1} labels="" l o missing=""
    while read -r l o _; do
      [ -n "$l" ] && [ "$l" != common ] && [[ "$l" != \#* ]] || continue
      if have_weights "$o"; then labels+="${labels:+,}$l"; else missing+=" $l"; fi
    done <"$cfg"
    if [ $dry = 0 ] && ! compgen -G "$glob" >/dev/null; then skip "no data at $glob ($hint)"; return; fi
    [ -z "$missing" ] || note "{\"left_out\":$(json_str "${missing# }"),\"why\":\"their published weights are not in weights/ (scripts/download_lopt_weights.sh)\"}"
    local args=("$task" --cfg "$cfg" --steps "$steps" --seeds "$seeds" --only "$labels" --logdir "$out/train/$sub"
                --timeout "$limit" --resume --no-build)
    # An experiment that starts over trains every run again: the folder keeps no log of an earlier start.
    [ $dry = 1 ] || [ $carried = 1 ] || rm -rf "${out:?}/train/$sub"
    [ -z "$extra" ] || args+=(--extra "$extra")
    [ $dry = 1 ] && args+=(--dry-run)
    if [ $dry = 1 ]; then
      echo "scripts/compare_optimizers.sh $(cmdline "${args[@]}")"
      scripts/compare_optimizers.sh "${args[@]}" 2>/dev/null | sed 's/^/  /'
    else
      run --limit $((limit * 60)) scripts/compare_optimizers.sh "${args[@]}"
    fi
    finish
  }
  if begin train_vit_fashion_mnist "Table 4 and Figures 10-11, scaled down: ViT-Ti/4 on Fashion-MNIST, tuned AdamW and Muon, CELO2, VeLO, small_fc_lopt" \
       "logdir=train/vit" "steps=$vit_steps" "seeds=$seeds"; then
    train vit scripts/compare/pylo_vit.cfg "$vit_steps" 'data/fashion_mnist/fashion-mnist-train-*.tar' \
      "scripts/prepare_fashion_mnist.sh, or carry data/fashion_mnist" "$vit_extra"
  fi
  # The quick pass's 60 GPT-2 steps (0.5M tokens) may take the KJV where the English corpus is missing; the
  # full pass's 800 (6.6M tokens) would go over its 1.0M training tokens six times, so it waits for the corpus.
  english='data/english/english_train_*.bin' corpus=english extra=$gpt2_extra
  if [ $dry = 0 ] && [ $quick = 1 ] && ! compgen -G "$english" >/dev/null &&
     compgen -G 'data/kjv/kjv_train_*.bin' >/dev/null; then
    corpus=kjv extra="$gpt2_extra -i data/kjv/kjv_train_*.bin -j data/kjv/kjv_val_*.bin"  # no English corpus here
  fi
  if begin train_gpt2_english "Figures 10-11 for GPT-2, scaled down: GPT-2 124M on the English corpus (the quick pass: KJV where it is missing), tuned AdamW and Muon, CELO2, VeLO, small_fc_lopt" \
       "logdir=train/gpt2" "steps=$gpt2_steps" "seeds=$seeds" "corpus=$corpus"; then
    train gpt2 scripts/compare/pylo_gpt2.cfg "$gpt2_steps" "data/$corpus/${corpus}_train_*.bin" \
      "scripts/prepare_english.sh, or carry data/english" "$extra"
  fi
  if begin fig8_gpt2_schedule_wd "Figure 8, scaled down: CELO2 with and without weight decay, constant and cosine schedule, GPT-2 124M (AdamW for reference)" \
       "logdir=train/gpt2_fig8" "steps=$gpt2_steps" "seeds=$seeds" "corpus=$corpus"; then
    train gpt2 scripts/compare/pylo_gpt2_fig8.cfg "$gpt2_steps" "data/$corpus/${corpus}_train_*.bin" \
      "scripts/prepare_english.sh, or carry data/english" "$extra" gpt2_fig8
  fi
  if begin fig16_gpt2_qkv "Figure 16, scaled down: q, k and v as three tensors or one, GPT-2 124M, AdamW, CELO2, VeLO" \
       "logdir=train/gpt2_fig16" "steps=$gpt2_steps" "seeds=$seeds" "corpus=$corpus"; then
    train gpt2 scripts/compare/pylo_gpt2_fig16.cfg "$gpt2_steps" "data/$corpus/${corpus}_train_*.bin" \
      "scripts/prepare_english.sh, or carry data/english" "$extra" gpt2_fig16
  fi

  # The full configurations, for a user with the data, the weights and the GPUs; each run here on a few
  # steps with synthetic images or the KJV shards in place of ImageNet and FineWeb.
  if begin configs_smoke "Table 4, Figures 8, 10-11 and 16 as a user runs them: the full configurations, each tested on 3 steps"; then
    vit_cfg="-e vit-b16 --image 224 --channels 3 --classes 1000 --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225"
    vit_cfg+=" --scale-min 0.08 --crop-pct 0.875 --mixup 0.8 --cutmix 1.0 --randaugment rand-m9-mstd0.5-inc1"
    vit_cfg+=" -b 128 -d 4096 -k cosine"
    vit_data="-i 'imagenet/imagenet1k-train-{0000..1023}.tar' -j 'imagenet/imagenet1k-validation-{0000..0063}.tar'"
    vit_data+=" -x 150000 -v 5000 --ckpt-dir ckpt -n 5000"
    gpt2_cfg="-e d24 -b 16 -t 1024 -d 524288 -k cosine"
    gpt2_data="-i 'data/fineweb_edu/edu_fineweb_train_*.bin' -j 'data/fineweb_edu/edu_fineweb_val_*.bin'"
    gpt2_data+=" -x 10000 -v 250 --ckpt-dir ckpt -n 1000"
    read -r -a vit <<<"$vit_cfg"
    read -r -a gpt2 <<<"$gpt2_cfg"
    # config NAME COMMAND PROGRAM ARGS...: the configuration as a user runs it (COMMAND, noted with optimizer o's
    # weights), then PROGRAM ARGS here for 3 steps, with random meta-weights (w) where the published are missing.
    config() {
      note "{\"config\":{\"name\":$(json_str "$1"),\"optimizer\":\"$o\",\"command\":$(json_str "$2"),\"weights\":$(json_str "$wtext")}}"
      shift 2
      run "$@" "${w[@]}"
    }
    for o in $smoke_opts; do
      w=() wtext="none needed"
      [ -z "$(weights_of "$o")" ] || wtext="published (weights/)"
      have_weights "$o" || { w=(--lopt-random 1); wtext="random, of the published shapes (weights/ has none here)"; }
      config table4_vit_b16_imagenet "mpirun -np 8 ./train_vit -o $o $vit_cfg $vit_data --log vit_b16_$o.jsonl" \
        "$train_vit" -o "$o" "${vit[@]}" --synthetic 1 -x 3 -v 0
      config fig8_gpt2_355m_fineweb "./train_gpt2 -o $o $gpt2_cfg $gpt2_data --log gpt2_355m_$o.jsonl" \
        "$train_gpt2" -o "$o" "${gpt2[@]}" -x 3 -v 0 -s 0
      # Figures 10-11 (curves across sizes): Figure 8's recipe at 124M and 774M; Figure 16: q, k, v as one tensor.
      for size in d12:124m d36:774m; do
        cfg="-e ${size%%:*} ${gpt2_cfg#-e d24 }"
        read -r -a a <<<"$cfg"
        config "fig10_gpt2_${size#*:}_fineweb" "./train_gpt2 -o $o $cfg $gpt2_data --log gpt2_${size#*:}_$o.jsonl" \
          "$train_gpt2" -o "$o" "${a[@]}" -x 3 -v 0 -s 0
      done
      config fig16_gpt2_355m_fused "./train_gpt2 -o $o $gpt2_cfg --qkv fused $gpt2_data --log gpt2_355m_fused_$o.jsonl" \
        "$train_gpt2" -o "$o" "${gpt2[@]}" --qkv fused -x 3 -v 0 -s 0
    done
    finish
  fi
else
  if begin table3_data_parallel "Table 3: GPT-2 124M at 4 x 1024 tokens per GPU on $world GPUs, all-reduce and sharded" \
       "world=$world"; then
    if [ $dry = 0 ] && [ "${gpus:-0}" -lt "$world" ]; then
      skip "this machine lists ${gpus:-0} GPUs, fewer than WORLD=$world"
    else
      dp_opts=$([ $quick = 1 ] && echo "adamw small_fc_lopt:fast velo" || echo "adamw muon small_fc_lopt:fast velo")
      for o in $dp_opts; do
        run --limit $((limit * 4)) env OUTFILE="$log_dir/dp_${o//:/_}.jsonl" PARTS=table3 QKV=separate OPTIMIZERS="$o" \
          WORLD="$world" STEPS=$bench_steps TIMEOUT="$limit" TRAIN_GPT2="$train_gpt2" REPORT="$report" \
          scripts/bench_data_parallel.sh
        [ $dry = 1 ] || { cat "$log_dir/dp_${o//:/_}.jsonl" >>"$part" 2>/dev/null; rm -f "$log_dir/dp_${o//:/_}.jsonl"; }
      done
      finish
    fi
  fi
fi
