// The generation loop's text for the Markdown and HTML reports (generation.hpp).
#include "report/generation.hpp"

#include "report/escape.hpp"

#include <string>
#include <vector>

namespace inferscope::report {
namespace {

std::vector<DetailCell> phase_row(const char* name, const analyze::GenerationPhase& p) {
  const double busy = p.token_ms > 0 ? p.gpu_ms / p.token_ms * 100.0 : 0;
  std::vector<DetailCell> row;
  for (std::string text :
       {std::string(name), std::to_string(p.tokens), fmt(p.token_ms, 3) + " / " + fmt(p.token_ms_p90, 3),
        fmt(p.gpu_ms, 3) + " (" + fmt(busy, 0) + " %)", fmt(p.kernels, 1) + " (" + fmt(p.call_kernels, 1) + ")",
        fmt(p.launch_ms, 3), fmt(p.syncs, 2) + " (" + fmt(p.sync_ms, 3) + ")", fmt(p.d2d_copies, 1), fmt(p.host_ms, 3)})
    row.push_back(words_cell(std::move(text)));
  return row;
}

}  // namespace

GenerationText generation_text(const analyze::GenerationLoop& g) {
  GenerationText t;
  t.lead = "Each step generates " + fmt(g.tokens_per_step, 0) + " tokens, one call of ";
  t.token_function = g.token_function;
  t.rest = " per token (a generation loop: " + g.marker + "). Time to first token " + fmt_ms(g.ttft_ms) + " ms (p90 " +
           fmt_ms(g.ttft_ms_p90) + "), time per output token " + fmt_ms(g.tpot_ms) + " ms (p90 " + fmt_ms(g.tpot_ms_p90) +
           "), " + fmt(g.tokens_per_s, 1) + " tokens/s per sequence; measured over " + std::to_string(g.steps) +
           " typical steps. A token is done when the GPU work it launched has ended.";
  t.phases = {"generation_phases", "generation-phases", "Generation loop",
              {{"phase", CellKind::kWords}, {"tokens"}, {"ms per token, p50 / p90"}, {"GPU ms (of the token)"},
               {"kernels (in the call)"}, {"launch calls, ms"}, {"blocking calls (ms)"}, {"device copies"},
               {"host outside CUDA, ms"}},
              {phase_row("prefill (first token)", g.prefill), phase_row("decode (each later token)", g.decode)},
              {}};
  t.notes = g.notes;
  t.notes.push_back("Per token: times are medians, the other columns means; kernels in brackets are those launched "
                    "inside the per-token call. Blocking calls are synchronizations and synchronous copies (.item(), "
                    ".cpu(), .tolist()); device copies are copies that are neither host-to-device nor device-to-host.");
  return t;
}

std::string generation_headline(const analyze::GenerationLoop& g) {
  return fmt(g.tokens_per_step, 0) + " tokens per step: time to first token " + fmt_ms(g.ttft_ms) +
         " ms, per output token " + fmt_ms(g.tpot_ms) + " ms (p90 " + fmt_ms(g.tpot_ms_p90) + "), " +
         fmt(g.tokens_per_s, 1) + " tokens/s per sequence";
}

}  // namespace inferscope::report
