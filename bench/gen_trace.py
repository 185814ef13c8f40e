#!/usr/bin/env python3
"""Writes a synthetic PyTorch profiler (Kineto) trace of about SIZE bytes for
bench/bench_trace.sh: training steps of CPU ops, cudaLaunchKernel / cudaMemcpyAsync runtime
calls with their ac2g flow events, kernels on a compute stream, NCCL kernels on a
communication stream, memcpys and memsets, in the proportions and event sizes of the reference
traces (about 3 KB of JSON per GPU activity, 4 runtime calls per GPU activity).

usage: gen_trace.py OUT.json SIZE_MB
"""
import random
import sys

KERNELS = [
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align1>(cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align1::Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
    "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float>(long, int volatile*, TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float)",
    "ampere_sgemm_128x64_nn",
    "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float, float, float, float, cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float*, float*, float const*, float const*, float)",
]
OPS = ["aten::mm", "aten::add", "aten::cat", "aten::copy_", "autograd::engine::evaluate_function: AddmmBackward0", "aten::_foreach_add_"]


def main():
    out, size = sys.argv[1], int(float(sys.argv[2]) * 1e6)
    rnd = random.Random(1)
    pid, tid = 4515, 4515
    ts = 1683564901548726
    corr = 1000
    step = 0
    written = 0
    with open(out, "w", buffering=1 << 20) as f:
        f.write('{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 0, '
                '"world_size": 8}, "traceEvents": [\n')
        first = True
        while written < size:
            step += 1
            lines = []
            step_ts = ts
            lines.append('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": %d, "tid": %d, "ts": %d, "dur": %d, "args": {"External id": %d, "Ev Idx": 0}}' % (step, pid, tid, ts, 40000, corr))
            gts = ts + 200
            for i in range(400):
                ts += rnd.randint(5, 40)
                op = OPS[i % len(OPS)]
                lines.append('{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": %d, "tid": %d, "ts": %d, "dur": %d, "args": {"External id": %d, "Ev Idx": %d, "Input Dims": [[2048, 1024], [1024, 1024]], "Input type": ["float", "float"], "Fwd thread id": 0, "Sequence number": %d}}' % (op, pid, tid, ts, rnd.randint(20, 90), corr, i, corr))
                for extra in range(3):
                    corr += 1
                    lines.append('{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamIsCapturing", "pid": %d, "tid": %d, "ts": %d, "dur": 1, "args": {"External id": %d, "cbid": 317, "correlation": %d}}' % (pid, tid, ts + extra, corr, corr))
                corr += 1
                kind = i % 20
                if kind == 7:
                    name, cat, stream = "Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 25
                    call = "cudaMemcpyAsync"
                elif kind == 13:
                    name, cat, stream = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "kernel", 27
                    call = "cudaLaunchKernel"
                else:
                    name, cat, stream = KERNELS[i % len(KERNELS)], "kernel", 7
                    call = "cudaLaunchKernel"
                lines.append('{"ph": "X", "cat": "cuda_runtime", "name": "%s", "pid": %d, "tid": %d, "ts": %d, "dur": %d, "args": {"External id": %d, "cbid": 211, "correlation": %d}}' % (call, pid, tid, ts + 4, rnd.randint(4, 15), corr, corr))
                lines.append('{"ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %d, "cat": "ac2g", "name": "ac2g"}' % (corr, pid, tid, ts + 4))
                gts = max(gts, ts + 10) + rnd.randint(1, 8)
                dur = rnd.randint(3, 200)
                if cat == "gpu_memcpy":
                    lines.append('{"ph": "X", "cat": "gpu_memcpy", "name": "%s", "pid": 0, "tid": %d, "ts": %d, "dur": %d, "args": {"External id": %d, "device": 0, "context": 1, "stream": %d, "correlation": %d, "bytes": %d, "memory bandwidth (GB/s)": 11.4}}' % (name, stream, gts, dur, corr, stream, corr, dur * 11400))
                else:
                    lines.append('{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": %d, "ts": %d, "dur": %d, "args": {"External id": %d, "queued": 0, "device": 0, "context": 1, "stream": %d, "correlation": %d, "registers per thread": 128, "shared memory": 49152, "blocks per SM": 2.3, "warps per SM": 18.4, "grid": [432, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %%": 25}}' % (name, stream, gts, dur, corr, stream, corr))
                lines.append('{"ph": "f", "id": %d, "pid": 0, "tid": %d, "ts": %d, "cat": "ac2g", "name": "ac2g", "bp": "e"}' % (corr, stream, gts))
                gts += dur
            ts = max(ts, step_ts + 40000) + 10
            text = (",\n" if not first else "") + ",\n".join(lines)
            first = False
            f.write(text)
            written += len(text)
        f.write('\n]}\n')


if __name__ == "__main__":
    main()
