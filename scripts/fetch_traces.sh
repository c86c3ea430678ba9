#!/usr/bin/env bash
# Fetches the real GPU traces the tests and benchmarks use (README, "Real
# traces") from the public repositories that published them, into DIR
# (default: ../shared/traces, where the tests look; GPUUTIL_TRACES_DIR
# points them elsewhere), and checks each file's SHA-256 against the copy
# gpuutil's tests were written against. Needs curl and network access.
#
#   scripts/fetch_traces.sh [DIR]
#
# Exit 0 when every file is present and matches; 1 when a download failed
# or a checksum differs (the file is then kept as NAME.mismatch, not used).
# Licences: pytorch/kineto BSD-3-Clause; facebookresearch/HolisticTraceAnalysis
# and AMD-AGI/TraceLens MIT. The HTA and Kineto URLs are pinned to a commit;
# the TraceLens ones follow its main branch.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-../shared/traces}"
mkdir -p "$dir"
status=0
while read -r name sha licence url; do
  [ -z "$name" ] && continue
  if [ -f "$dir/$name" ] && echo "$sha  $dir/$name" | sha256sum -c --status; then
    echo "ok       $name (already there)"
    continue
  fi
  echo "fetching $name ($licence) from $url"
  if ! curl -fsSL --retry 2 -o "$dir/$name.part" "$url"; then
    echo "FAILED   $name: download failed" >&2
    rm -f "$dir/$name.part"
    status=1
    continue
  fi
  if echo "$sha  $dir/$name.part" | sha256sum -c --status; then
    mv "$dir/$name.part" "$dir/$name"
    echo "ok       $name"
  else
    mv "$dir/$name.part" "$dir/$name.mismatch"
    echo "MISMATCH $name: its SHA-256 differs from the tested copy; kept as $name.mismatch" >&2
    status=1
  fi
done <<'LIST'
hta_alexnet_a100_sync.json.gz b9febb1abc8cc729a2890fb6a4171de9867ba72c944437ee046067e7c89912dc MIT https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/66e3c5475683bd5f2cc79884dfe9a60a085f5cb6/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz
hta_cpu_only.json.gz b2ff87b29bd604b0c30bca65915af4388b53a7f421f0897c68a7862e1559b6e5 MIT https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/460a36b35f22dafdea2c1091070d99ff42852d26/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz
hta_event_sync_a100.json.gz 63074c678eb92a77410d7911b64ed39c0e859d0998f74ee9b862de7a12cd7616 MIT https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/040e7991c5421edcc6b4e3f8d60cc2b0a5cfb5b5/tests/data/critical_path/cuda_event_sync/event_sync_trace.json.gz
hta_mi250_rocm_train.json.gz 39fdab670f9e80a05ccc6d0d07611b3aeba1092fa10681d8dd08cea48d0488b5 MIT https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/4f71f3ba8b26caaac2f00f6528e7f6e728283d54/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz
hta_nccl_a100_rank0.json.gz c1cf9c575fdcd7bdc6326ceab834f94b351f81ae55577a7471aa9e328fb8b58e MIT https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/3cb077c83144b564244b9fe869d16d92582e27c3/tests/data/nccl_parser_config/nccl_data.json.gz
hta_no_gpu_with_dataloader.json.gz 7abc3802f28155bf163a2b71d08ee57d3f759d2ffc6a190480e6556f328e4476 MIT https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/56bcd691072605e428eba4f05d54b74ccdd5ffa5/tests/data/rank_non_gpu/rank_non_gpu.json.gz
hta_sampled_rank0.json.gz 71b98c30a2751cc56d9bf78f8fb76467acd56e0be6a1f0da23c600941d29aafd MIT https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/3efc27e2198d1d0d2f1ccf9fa825b5347b6cb55b/tests/data/trace_filter/sampled_rank-0.json.gz
hta_sampled_rank1.json.gz 2f9a65fd5f319ec8e60468a22dc9a624eb4b40369c729f6f897259d587eca57e MIT https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/89bb65f00c0e8b731c9c019e72a19676caf9cc92/tests/data/trace_filter/sampled_rank-1.json.gz
hta_train_v100_dataloader_nccl_rank1.json.gz 5e69e04ed19b2dbf59e632008146c1bd6da417dc3af7ab4885c619b11e34f1bf MIT https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/0c2146a8d003629a67f225528969752e1f0656aa/tests/data/trace_diff/test/test.json.gz
hta_train_v100_ns_resolution.json.gz e279d7280e73719e8dd9550e120cfe081fbe268596bd297fe5fcbf63e2b75a09 MIT https://raw.githubusercontent.com/facebookresearch/HolisticTraceAnalysis/c980c48309f7d59edf89271e771db4233dd3ccfa/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz
kineto_resnet50_nw4_v100.json.gz c290eb249e74824736f81886587614fc5d96660d3e60d0c256dee4b4a0e268f6 BSD-3-Clause https://raw.githubusercontent.com/pytorch/kineto/c6e5fe205a8be11181aac547f88424cb3a28c8f8/tb_plugin/samples/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz
tracelens_h100_bert_small_inference.json.gz 309220b5130afa8bc5151252fb1fc3fc9fe6cdc099a07854c0c157e03abb4233 MIT https://raw.githubusercontent.com/AMD-AGI/TraceLens/main/tests/traces/h100/gaunernst_bert-small-uncased__1016001.json.gz
tracelens_mi300x_torch_compile_triton.json.gz fe026809aa6cb13e3dcec85bca3c3a955da52284de49178675499b452874190e MIT https://raw.githubusercontent.com/AMD-AGI/TraceLens/main/tests/traces/torch_compile_triton/trace.json.gz
LIST
exit $status
