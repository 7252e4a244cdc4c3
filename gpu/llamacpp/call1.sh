#!/bin/bash
# GPU host, call 1 (carrying .s4/l1): what the machine has; unpack llama.cpp and the wheels; configure the CUDA
# build in the foreground, then build llama-server detached (setsid) so the model's pieces travel meanwhile.
set -o pipefail
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
W=$HOME/w; mkdir -p $W/model
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  nvcc --version | tail -1; cmake --version | head -1; nproc; python3 --version
} 2>&1 | tee $OUT/call1.log
t0=$(date +%s)
xz -dc .s4/l1/llama-trim.tar.xz | tar -x -C $W
python3 -m pip install -q --no-index --no-deps --no-compile --target $W/site .s4/l1/whl/*.whl 2>&1 | tail -3
cp .s4/l1/model.part0 $W/model/
echo "unpacked in $(( $(date +%s) - t0 )) s" | tee -a $OUT/call1.log
t1=$(date +%s)
cmake -S $W/llama.cpp -B $W/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  > $OUT/cmake.log 2>&1
echo "configure rc=$? in $(( $(date +%s) - t1 )) s" | tee -a $OUT/call1.log
date +%s > $W/build.start
setsid nohup bash -c "cmake --build $W/build --target llama-server -j16 > $W/build.log 2>&1; echo \$? > $W/build.rc; date +%s > $W/build.end" >/dev/null 2>&1 </dev/null &
PYTHONPATH=$PWD:$W/site python3 -m sweep --help 2>&1 | head -3 | tee -a $OUT/call1.log
