// Short kernel names (lib/text/names.hpp, shared with the Perfetto export in lib/export), named here in the
// writers' namespace as they have always called them.
#pragma once

#include "text/names.hpp"

namespace inferscope::report {

using text::kShortNameChars;
using text::KernelNames;
using text::short_kernel_name;

}  // namespace inferscope::report
