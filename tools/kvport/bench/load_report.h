// SPDX-License-Identifier: Apache-2.0
// The report of `kvport load`: a table per system (one row per offered rate: achieved rate,
// bandwidth, p50/p99/p99.9/max of sequences, probes, gets and puts, misses and errors), the
// ratios of redis to kvport at the offered rates both ran, the curve as CSV (one row per system
// and step) and as a PNG drawn by gnuplot (sequence p50 and p99 and probe p99 against the
// achieved rate).
#pragma once

#include <string>

#include "bench/load_run.h"
#include "kvport/status.h"

namespace kvport::bench {

std::string FormatLoadText(const LoadReport& report);
std::string FormatLoadCsv(const LoadReport& report);

// Draws the curve of `csv_path` (written by the caller from FormatLoadCsv) into `png_path` with
// `gnuplot` (a name looked up in PATH, or a path). NotFound when gnuplot is not installed (with
// the package to install), Internal when it fails.
Status PlotLoadCurve(const std::string& csv_path, const std::string& png_path,
                     const std::string& gnuplot = "gnuplot");

}  // namespace kvport::bench
