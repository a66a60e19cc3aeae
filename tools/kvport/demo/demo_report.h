// SPDX-License-Identifier: Apache-2.0
// `kvport demo` output: the progress line while it runs and the report at the end.
#pragma once

#include <string>

#include "demo/demo_run.h"

namespace kvport::demo {

// "  120/300 requests  hit 68.2% of 201k tokens  2.41 GiB moved  5.1 s" (no newline).
std::string FormatProgress(const DemoProgress& p);

// The short readable report, ending with a newline.
std::string FormatDemoReport(const DemoReport& r, const DemoOptions& options);

}  // namespace kvport::demo
