// A hand-made, realistic analysis (a launch-bound GPT-2 style step) for the report writer tests and the demo.
// `hostile` puts markup, quotes, pipes and invalid UTF-8 into every name that would come from a trace.
#pragma once

#include "analyze/analysis.hpp"

#include <string>

namespace inferscope::report::testing {

inline analyze::Analysis sample_analysis(bool hostile = false) {
  using namespace analyze;
  const std::string evil = hostile ? "<script>alert('x')</script> & \"q\" | `t` \xff\xfe" : "";
  Analysis a;
  a.source = hostile ? "/tmp/run<1>&\"x\".iscope" : "/tmp/gpt2.iscope";
  a.gpu_work_recorded = true;  // a GPU program: kernels, copies and syncs below
  a.source_format = "dump";
  a.process = {{"pid", "4242"}, {"cmdline", "python serve.py --model gpt2"}, {"gpu.name", "NVIDIA H100"}};
  a.trace_ms = 1523.25;
  a.end_to_end_ms = 12.5;
  a.events = 184467;

  a.steps.name = "inference_step" + evil;
  a.steps.detected = false;
  a.steps.count = 100;
  a.steps.mean_ms = 12.5;
  a.steps.p50_ms = 12.1;
  a.steps.p90_ms = 13.4;
  a.steps.p99_ms = 18.9;
  a.steps.max_ms = 21.0;
  a.steps.min_ms = 11.8;
  a.steps.slowest = {{41, 520.5, 21.0}, {7, 95.25, 18.9}, {88, 1101.0, 15.2}};
  a.children = {{"/tmp/gpt2.4250.iscope", 4250, "python -c from multiprocessing.spawn import spawn_main" + evil, true,
                 5120, 0, 310.0, "cpu_bound", ""},
                {"/tmp/gpt2.4251.iscope", 4251, "", false, 0, 0, 0, "", "/tmp/gpt2.4251.iscope: cut short"}};
  a.steps.total = 103;
  a.steps.warmup = 3;
  a.steps.typical = 98;
  a.steps.warmup_reason = "the first 3 step(s) were slower than median + max(3 scaled MADs, 25 %) of all steps";
  a.steps.outlier_bound_ms = 15.1;
  a.steps.outliers = {{7, 95.25, 18.9}, {41, 520.5, 21.0}};

  auto& b = a.breakdown;
  b.step_ms = 12.5;
  b.cpu_preprocessing_ms = 1.5;
  b.h2d_ms = 0.25;
  b.gpu_compute_ms = 5.0;
  b.d2h_ms = 0.25;
  b.sync_wait_ms = 1.0;
  b.framework_overhead_ms = 3.5;
  b.idle_ms = 1.0;
  b.gpu_utilization = 0.44;
  b.gpu_idle_waiting_on_host_ms = 5.5;
  b.gpu_idle_gaps_between_kernels_ms = 0.75;
  b.gpu_idle_waiting_on_sync_ms = 0.75;

  Finding f;
  f.category = "launch_bound";
  f.title = "Kernel launches limit the GPU: 412 kernels of 9 us mean per step" + evil;
  f.confidence = 0.86;
  f.primary = true;
  f.impact_ms = 5.5;
  f.impact_pct = 44.0;
  f.evidence = {"412 kernels per step, median duration 9.1 us, launch API time 8.2 us each",
                "GPU idle 5.5 ms per step waiting for the host (44 %)" + evil};
  f.metrics = {{"kernels_per_step", 412}, {"median_kernel_us", 9.1}, {"launch_api_us", 8.2}};
  f.examples = {{520.5, 524.7, "step 41: 128 kernels under 10 us while thread 'main' launched them" + evil}};
  f.suggestions = {{"Capture the decode step in a CUDA graph (torch.cuda.graphs / torch.compile mode=\"reduce-overhead\")",
                    "high", 4.5, true, "replay: launches and the dispatch gaps between them replaced by one graph launch"},
                   {"Fuse elementwise ops (torch.compile) to cut the kernel count", "high", 3.0},
                   {"Increase the batch size so each kernel does more work", "medium", 2.0},
                   {"Move Python-side bookkeeping out of the step loop", "low", 0.5}};
  a.findings.push_back(f);

  Finding s;
  s.category = "sync_bound";
  s.title = "A device synchronization per step stalls the host";
  s.confidence = 0.45;
  s.uncertain = true;
  s.impact_ms = 1.0;
  s.impact_pct = 8.0;
  s.evidence = {"cudaStreamSynchronize called once per step from generate(), 1.0 ms mean wait"};
  s.metrics = {{"syncs_per_step", 1}, {"mean_wait_ms", 1.0}};
  s.examples = {{95.25, 96.4, "step 7: host blocked 1.15 ms in cudaStreamSynchronize"}};
  s.suggestions = {{"Replace .item() on the logits with an on-device argmax", "high", 0.8, true, "replay: syncs removed"},
                   {"Use non_blocking copies with pinned memory for the output", "medium", 0.3},
                   {"Synchronize once per batch of steps instead of each step", "low", 0.2}};
  a.findings.push_back(s);

  a.kernels = {{"void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<c10::Half>>" + evil, 24800,
                2.48, 1.0, 0.38, "transformer.h.3.mlp | GELU" + evil},
               {"ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x4_nn", 4800, 1.92, 4.0, 0.29,
                "transformer.h.3.attn"}};
  a.python = {{"GPT2Attention.forward" + evil, "modeling_gpt2.py", 312, 1200, 310.5, 88.0},
              {"generate", "generation/utils.py", 1500, 100, 1250.0, 95.5}};
  a.ranges = {{"inference_step", 100, 1250.0, 20.0, 12500.0, 12100.0, 18900.0, 21000.0},
              {"tokenize" + evil, 100, 150.0, 150.0, 1500.0, 1480.0, 1900.0, 2100.0}};
  a.copies = {{"h2d", "pageable", "device", 200, 13107200, 25.0, 0.52, 25.0},
              {"d2h", "device", "pageable", 100, 5120000, 25.0, 0.2, 0.0}};
  a.syncs = {{"stream", 100, 100.0, 1.9, "generate" + evil,
              {{"cudaStreamSynchronize", "generate (utils.py:1500)" + evil, 100, 100.0}}}};
  a.allocations = {{"alloc", "device", 12, 50331648, 1.2, "Block.forward (model.py:88)",
                    {{"cudaMalloc", "Block.forward (model.py:88)", 12, 1.2}}},
                   {"free", "device", 12, 50331648, 0.4, "-", {}}};
  a.graph_launches = {{"cudaGraphLaunch", 100, 0.8, "CUDAGraph.replay (graphs.py:120) / range decode" + evil,
                       {{"cudaGraphLaunch", "CUDAGraph.replay (graphs.py:120) / range decode" + evil, 100, 0.8}}}};
  a.layers = {{"transformer.h.3.attn" + evil, 1200, 220.0, 150.0, 9600}};
  a.threads = {{1, 1234, "main" + evil, 1300.0, 1280.0, 42, "schedstat"},
               {2, 1240, "tokenizer-pool", 90.0, 88.0, 3, "schedstat"},
               {3, 1241, "bg-hog", 48.7, 0.0, 0, "ticks"},  // below one clock tick: not "0.000"
               {4, 1242, "idle", 0.0, 0.0, 0, ""}};          // no per-thread counters

  a.alignment.kernels_checked = 24800;
  a.alignment.max_violation_us = 0.35;
  a.alignment.violations_over_1us = 0;
  a.alignment.violation_pct = 0.0;
  a.alignment.ok = true;
  a.alignment.note = "TSC clock, 12 calibration points";

  auto& rep = a.representative;
  rep.step = {7, 95.25, 12.4};
  TimelineLane cpu{"thread main (1234)" + evil, false, {}};
  cpu.spans = {{0.0, 12.4, "inference_step", "range", 0},
               {0.1, 1.6, "tokenize" + evil, "range", 1},
               {1.7, 11.0, "GPT2Model.forward", "python", 1},
               {1.8, 1.81, "cudaLaunchKernel", "api", 2},
               {11.2, 12.3, "cudaStreamSynchronize", "sync", 1}};
  TimelineLane gpu{"GPU 0 stream 7", true, {}};
  gpu.spans = {{1.6, 1.85, "Memcpy HtoD", "h2d", 0},
               {1.9, 2.4, "ampere_fp16_s16816gemm" + evil, "kernel", 0},
               {2.5, 2.51, "vectorized_elementwise_kernel", "kernel", 0},
               {12.0, 12.25, "Memcpy DtoH", "d2h", 0}};
  rep.lanes = {cpu, gpu};

  a.drops = {{"buffer_full", 17}};
  a.warnings = {"17 records dropped (buffer_full): numbers may be slightly low" + evil};
  return a;
}

}  // namespace inferscope::report::testing
