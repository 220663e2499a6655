// The cells and lines the human-readable reports (text, Markdown, HTML)
// share, so that they show the same figures in the same words.
#pragma once

#include <string>
#include <vector>

#include "pipetune/analyzer/diagnosis.h"

namespace pipetune::analyzer::internal {

using Table = ReportTable;

// One row per stage: stage, op, parallelism, cores, outputs/s per core, max
// outputs/s, busy, waiting for input, blocked on output, limited by.
Table StageTable(const Diagnosis& d);

// "label: value" lines of the headline: throughput, consumer, CPU, memory,
// drops, window, and the truncation warning when there is one.
std::vector<std::pair<std::string, std::string>> Headline(const Diagnosis& d);

// One line per what-if question.
std::vector<std::string> WhatIfLines(const Diagnosis& d);

// "none", or "12 spans, 3 consumer steps" (always present: a report must say).
std::string DropsText(const Diagnosis& d);

// Predicted over measured, "1.02x", or that the window was too short to
// judge it (JudgeWindow): never a confident ratio from a few snapshots.
std::string RatioText(const Diagnosis& d);

}  // namespace pipetune::analyzer::internal
