// A unified line diff of two configs (rewrite.h, UnifiedDiff). Configs are
// small, so the longest common subsequence is computed outright.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pipetune/tuner/rewrite.h"

namespace pipetune::tuner {
namespace {

// Beyond this many cells the table would be too big: the diff then shows the
// whole old text removed and the new one added.
constexpr size_t kMaxTableCells = 16u << 20;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

struct Edit {
  char op;          // ' ', '-', '+'
  size_t old_line;  // 0-based index in the old text (for ' ' and '-')
  size_t new_line;  // 0-based index in the new text (for ' ' and '+')
};

std::vector<Edit> EditScript(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<Edit> edits;
  size_t n = a.size(), m = b.size();
  if ((n + 1) * (m + 1) > kMaxTableCells) {
    for (size_t i = 0; i < n; ++i) edits.push_back({'-', i, 0});
    for (size_t j = 0; j < m; ++j) edits.push_back({'+', n, j});
    return edits;
  }
  // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
  std::vector<std::vector<uint32_t>> lcs(n + 1, std::vector<uint32_t>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      edits.push_back({' ', i++, j++});
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      edits.push_back({'-', i++, j});  // removals first, as diff(1) prints them
    } else {
      edits.push_back({'+', i, j++});
    }
  }
  return edits;
}

}  // namespace

std::string UnifiedDiff(const std::string& old_text, const std::string& new_text, const std::string& old_name,
                        const std::string& new_name, int context) {
  if (old_text == new_text) return "";
  std::vector<std::string> a = Lines(old_text), b = Lines(new_text);
  std::vector<Edit> edits = EditScript(a, b);
  size_t keep = static_cast<size_t>(std::max(context, 0));
  std::string out = fmt::format("--- {}\n+++ {}\n", old_name, new_name);
  size_t k = 0;
  while (k < edits.size()) {
    if (edits[k].op == ' ') {
      ++k;
      continue;
    }
    // A hunk: from `keep` lines before this change to `keep` lines after the
    // last change that is no more than 2 * keep unchanged lines from the next.
    size_t begin = k >= keep ? k - keep : 0;
    while (begin < k && edits[begin].op != ' ') ++begin;
    size_t end = k;
    size_t unchanged_run = 0;
    for (size_t e = k; e < edits.size(); ++e) {
      if (edits[e].op == ' ') {
        if (++unchanged_run > 2 * keep) break;
      } else {
        unchanged_run = 0;
        end = e;
      }
    }
    size_t stop = std::min(edits.size(), end + 1 + keep);
    size_t old_count = 0, new_count = 0;
    for (size_t e = begin; e < stop; ++e) {
      if (edits[e].op != '+') ++old_count;
      if (edits[e].op != '-') ++new_count;
    }
    size_t old_start = edits[begin].old_line + (old_count > 0 ? 1 : 0);
    size_t new_start = edits[begin].new_line + (new_count > 0 ? 1 : 0);
    out += fmt::format("@@ -{},{} +{},{} @@\n", old_start, old_count, new_start, new_count);
    for (size_t e = begin; e < stop; ++e) {
      const std::string& line = edits[e].op == '+' ? b[edits[e].new_line] : a[edits[e].old_line];
      out += edits[e].op;
      out += line;
      out += '\n';
    }
    k = stop;
  }
  return out;
}

}  // namespace pipetune::tuner
