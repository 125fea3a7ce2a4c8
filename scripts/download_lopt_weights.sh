#!/usr/bin/env bash
# Downloads the published learned-optimizer meta-weights into weights/ (needs the network):
#   weights/mulo/{model.safetensors,config.json}        btherien/mulo           (small_fc_lopt / μLO)
#   weights/VeLO_RNN/{model.safetensors,config.json}     Pauljanson002/VeLO_RNN  (VeLO hypernetwork)
#   weights/VeLO_MLP/{model.safetensors,config.json}     Pauljanson002/VeLO_MLP  (VeLO candidate MLPs)
#   weights/celo2/{model.safetensors,config.json}        DiamondXL/celo2         (CELO2; a copy ships in
#                                                                                  optim/lopt/weights/celo2)
#   weights/elo/{model.safetensors,config.json}          DiamondXL/elo           (ELO)
#   weights/elo-celo2/{model.safetensors,config.json}    DiamondXL/elo-celo2     (ELO_CELO2)
# and checks each weight file's size against the published one where it is known (the DiamondXL files'
# exact sizes are not: their readers check every tensor's name, shape and dtype instead). With --jax it also fetches VeLO's
# original JAX checkpoint (flax msgpack) to weights/velo_jax_params; pass that path to --lopt-weights.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=weights
hf=https://huggingface.co
fetch() {  # url file
  mkdir -p "$(dirname "$2")"
  if command -v curl >/dev/null; then curl -fL --retry 3 -o "$2.part" "$1"; else wget -q -O "$2.part" "$1"; fi
  mv "$2.part" "$2"
}
check_size() {  # file bytes
  local got
  got=$(stat -c %s "$1")
  if [ "$got" != "$2" ]; then
    echo "download_lopt_weights: $1 has $got bytes, the published file has $2; delete it and run again." >&2
    exit 1
  fi
}
fetch "$hf/btherien/mulo/resolve/main/model.safetensors" "$dest/mulo/model.safetensors"
fetch "$hf/btherien/mulo/resolve/main/config.json" "$dest/mulo/config.json"
check_size "$dest/mulo/model.safetensors" 10096
for repo in VeLO_RNN VeLO_MLP; do
  fetch "$hf/Pauljanson002/$repo/resolve/main/model.safetensors" "$dest/$repo/model.safetensors"
  fetch "$hf/Pauljanson002/$repo/resolve/main/config.json" "$dest/$repo/config.json"
done
check_size "$dest/VeLO_RNN/model.safetensors" 9119908
check_size "$dest/VeLO_MLP/model.safetensors" 164296
for repo in celo2 elo elo-celo2; do
  fetch "$hf/DiamondXL/$repo/resolve/main/model.safetensors" "$dest/$repo/model.safetensors"
  fetch "$hf/DiamondXL/$repo/resolve/main/config.json" "$dest/$repo/config.json"
done
if [ "${1:-}" = "--jax" ]; then
  fetch "https://storage.googleapis.com/gresearch/learned_optimization/pretrained_lopts/aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_5620/params" \
        "$dest/velo_jax_params"
  echo "JAX checkpoint: $(stat -c %s "$dest/velo_jax_params") bytes in $dest/velo_jax_params"
fi
echo "weights ready in $dest/ (small_fc_lopt: $dest/mulo, VeLO: $dest, CELO2: $dest/celo2, ELO: $dest/elo," \
  "ELO_CELO2: $dest/elo-celo2)"
