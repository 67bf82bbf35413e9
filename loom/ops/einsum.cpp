// einsum. Labels are ints: a letter is its character code, the broadcast
// axes of "..." are 256 + i (so they sort before nothing and never clash).
// The contraction order is MLX's greedy rule (NumPy's, but for outer
// products, see greedy_path):
// at each step the pair whose result removes the most elements, ties broken
// by the lower cost, then by the first found; a pair whose intermediate would
// exceed the largest input or output is not taken. Each pairwise step is one
// batched matmul (or a broadcast multiply when nothing is summed).
#include "loom/ops/einsum.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "loom/ops/creation.h"
#include "loom/ops/elementwise.h"
#include "loom/ops/gather.h"
#include "loom/ops/linalg.h"
#include "loom/ops/reduce.h"
#include "loom/ops/shape.h"

namespace loom {

namespace {

constexpr int kEllipsisBase = 256;

using Labels = std::vector<int>;
using LabelSet = std::set<int>;

struct Parsed {
  std::vector<Labels> inputs;
  Labels output;
  std::map<int, int64_t> sizes;
};

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("[einsum] " + what); }

// One term: letters and at most one "..." standing for `ellipsis_dims` axes
// (right-aligned against the widest ellipsis, as broadcasting aligns them).
Labels parse_term(const std::string& term, int ellipsis_dims, int max_ellipsis) {
  Labels out;
  for (size_t i = 0; i < term.size(); ++i) {
    char c = term[i];
    if (c == '.') {
      if (term.compare(i, 3, "...") != 0) fail("Invalid ellipsis in subscripts '" + term + "'.");
      for (int e = 0; e < ellipsis_dims; ++e) {
        out.push_back(kEllipsisBase + max_ellipsis - ellipsis_dims + e);
      }
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      out.push_back(c);
    } else {
      fail(std::string("Subscripts must be letters, but got '") + c + "'.");
    }
  }
  return out;
}

int letters_in(const std::string& term) {
  int n = 0;
  for (char c : term) n += c != '.';
  return n;
}

std::vector<std::string> split_terms(const std::string& lhs) {
  std::vector<std::string> terms;
  std::string cur;
  for (char c : lhs) {
    if (c == ' ') continue;
    if (c == ',') {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  terms.push_back(cur);
  return terms;
}

Parsed parse(const std::string& subscripts, const std::vector<array>& operands) {
  std::string lhs = subscripts, rhs;
  const size_t arrow = subscripts.find("->");
  const bool explicit_out = arrow != std::string::npos;
  if (explicit_out) {
    lhs = subscripts.substr(0, arrow);
    for (char c : subscripts.substr(arrow + 2)) {
      if (c != ' ') rhs.push_back(c);
    }
  }
  std::vector<std::string> terms = split_terms(lhs);
  if (terms.size() != operands.size()) {
    fail("Number of operands, " + std::to_string(operands.size()) +
         ", does not match number of input subscripts, " + std::to_string(terms.size()));
  }
  std::vector<int> ellipsis(terms.size(), 0);
  int max_ellipsis = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const int letters = letters_in(terms[i]);
    const bool has_ellipsis = terms[i].find("...") != std::string::npos;
    const int nd = operands[i].ndim();
    if (has_ellipsis ? letters > nd : letters != nd) {
      fail("Invalid number of subscripts " + std::to_string(letters) + " for input " +
           std::to_string(i) + " with " + std::to_string(nd) + " dimensions.");
    }
    ellipsis[i] = has_ellipsis ? nd - letters : 0;
    max_ellipsis = std::max(max_ellipsis, ellipsis[i]);
  }
  Parsed p;
  for (size_t i = 0; i < terms.size(); ++i) {
    p.inputs.push_back(parse_term(terms[i], ellipsis[i], max_ellipsis));
  }
  // Repeated labels within one operand must agree exactly; across operands a
  // size of 1 broadcasts.
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    std::map<int, int64_t> own;
    for (size_t d = 0; d < p.inputs[i].size(); ++d) {
      const int64_t n = operands[i].shape(static_cast<int>(d));
      auto [it, fresh] = own.emplace(p.inputs[i][d], n);
      if (!fresh && it->second != n) {
        fail("Dimensions of repeated subscripts do not have the same size (" +
             std::to_string(it->second) + " != " + std::to_string(n) + ").");
      }
    }
  }
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    for (size_t d = 0; d < p.inputs[i].size(); ++d) {
      const int64_t n = operands[i].shape(static_cast<int>(d));
      auto [it, fresh] = p.sizes.emplace(p.inputs[i][d], n);
      if (fresh || it->second == n || n == 1) continue;
      if (it->second == 1) {
        it->second = n;
        continue;
      }
      fail("Cannot broadcast dimension " + std::to_string(d) + " of input " + std::to_string(i) +
           " with shape " + shape_to_string(operands[i].shape()) + " to size " +
           std::to_string(it->second) + ".");
    }
  }
  if (explicit_out) {
    p.output =
        parse_term(rhs, rhs.find("...") != std::string::npos ? max_ellipsis : 0, max_ellipsis);
    LabelSet seen;
    for (int l : p.output) {
      if (!seen.insert(l).second) fail("Repeat indices not allowed in output.");
      if (!p.sizes.count(l)) {
        fail(std::string("Output subscript '") + static_cast<char>(l) +
             "' does not appear in the input subscripts.");
      }
    }
  } else {
    // NumPy's implicit output: the broadcast axes, then the letters that
    // appear exactly once, in character order.
    std::map<int, int> count;
    for (auto& in : p.inputs) {
      for (int l : in) ++count[l];
    }
    for (int e = 0; e < max_ellipsis; ++e) p.output.push_back(kEllipsisBase + e);
    for (auto [l, c] : count) {
      if (l < kEllipsisBase && c == 1) p.output.push_back(l);
    }
  }
  return p;
}

// --- the greedy path ---------------------------------------------------------

int64_t set_size(const LabelSet& s, const std::map<int, int64_t>& sizes) {
  int64_t n = 1;
  for (int l : s) n *= sizes.at(l);
  return n;
}

int64_t flop_count(const LabelSet& contract, bool inner, int terms,
                   const std::map<int, int64_t>& sizes) {
  return set_size(contract, sizes) * (std::max(1, terms - 1) + (inner ? 1 : 0));
}

struct Contraction {
  LabelSet result, contract;
  bool inner = false;
  std::vector<LabelSet> remaining; // the operand list after this step
};

Contraction find_contraction(const std::vector<int>& positions, const std::vector<LabelSet>& sets,
                             const LabelSet& output) {
  Contraction c;
  LabelSet remain = output;
  for (size_t i = 0; i < sets.size(); ++i) {
    if (std::find(positions.begin(), positions.end(), static_cast<int>(i)) != positions.end()) {
      c.contract.insert(sets[i].begin(), sets[i].end());
    } else {
      remain.insert(sets[i].begin(), sets[i].end());
      c.remaining.push_back(sets[i]);
    }
  }
  for (int l : c.contract) {
    if (remain.count(l)) {
      c.result.insert(l);
    } else {
      c.inner = true;
    }
  }
  c.remaining.push_back(c.result);
  return c;
}

struct Candidate {
  int64_t removed = 0, cost = 0;
  int x = 0, y = 0;
  std::vector<LabelSet> sets;
  bool better_than(const Candidate& o) const {
    return removed != o.removed ? removed > o.removed : cost < o.cost;
  }
};

std::vector<std::vector<int>> greedy_path(std::vector<LabelSet> sets, const LabelSet& output,
                                          const std::map<int, int64_t>& sizes, int64_t memory_limit,
                                          int64_t naive_cost) {
  const int n = static_cast<int>(sets.size());
  if (n == 1) return {{0}};
  if (n == 2) return {{0, 1}};
  std::vector<std::vector<int>> path;
  std::vector<Candidate> known;
  int64_t path_cost = 0;
  auto consider = [&](int x, int y) {
    Contraction c = find_contraction({x, y}, sets, output);
    const int64_t new_size = set_size(c.result, sizes);
    if (new_size > memory_limit) return;
    const int64_t cost = flop_count(c.contract, c.inner, 2, sizes);
    if (path_cost + cost > naive_cost) return;
    Candidate cand;
    cand.removed = set_size(sets[x], sizes) + set_size(sets[y], sizes) - new_size;
    cand.cost = cost;
    cand.x = x;
    cand.y = y;
    cand.sets = std::move(c.remaining);
    known.push_back(std::move(cand));
  };
  auto disjoint = [](const LabelSet& a, const LabelSet& b) {
    for (int l : a) {
      if (b.count(l)) return false;
    }
    return true;
  };
  // First step: every pair; later steps: pairs with the newest tensor.
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) pairs.push_back({i, j});
  }
  for (int step = 0; step < n - 1; ++step) {
    for (auto [x, y] : pairs) {
      if (!disjoint(sets[x], sets[y])) consider(x, y);
    }
    if (known.empty()) {
      // Only outer products remain: MLX rescans the same pairs (all of them
      // at the first step, those with the newest tensor later), where NumPy
      // rescans every pair.
      for (auto [x, y] : pairs) consider(x, y);
      if (known.empty()) {
        std::vector<int> all(sets.size());
        for (size_t i = 0; i < sets.size(); ++i) all[i] = static_cast<int>(i);
        path.push_back(all);
        break;
      }
    }
    size_t best_i = 0;
    for (size_t i = 1; i < known.size(); ++i) {
      if (known[i].better_than(known[best_i])) best_i = i;
    }
    Candidate best = known[best_i];
    // Keep the other candidates, renumbered for the list after this step.
    std::vector<Candidate> kept;
    const int bx = best.x, by = best.y;
    for (auto& c : known) {
      if (c.x == bx || c.x == by || c.y == bx || c.y == by) continue;
      const int x = c.x, y = c.y;
      c.sets.erase(c.sets.begin() + (by - (by > x) - (by > y)));
      c.sets.erase(c.sets.begin() + (bx - (bx > x) - (bx > y)));
      c.sets.insert(c.sets.end() - 1, best.sets.back());
      c.x = x - (x > bx) - (x > by);
      c.y = y - (y > bx) - (y > by);
      kept.push_back(std::move(c));
    }
    known = std::move(kept);
    sets = best.sets;
    const int newest = static_cast<int>(sets.size()) - 1;
    pairs.clear();
    for (int i = 0; i < newest; ++i) pairs.push_back({i, newest});
    path.push_back({bx, by});
    path_cost += best.cost;
  }
  return path;
}

struct Plan {
  Parsed parsed;
  std::vector<std::vector<int>> path;
  int64_t naive_cost = 0, optimized_cost = 0;
  size_t naive_scaling = 0, optimized_scaling = 0;
};

Plan make_plan(const std::string& subscripts, const std::vector<array>& operands) {
  Plan plan;
  plan.parsed = parse(subscripts, operands);
  const Parsed& p = plan.parsed;
  std::vector<LabelSet> sets;
  LabelSet all;
  for (auto& in : p.inputs) {
    sets.emplace_back(in.begin(), in.end());
    all.insert(in.begin(), in.end());
  }
  const LabelSet output(p.output.begin(), p.output.end());
  int64_t memory_limit = set_size(output, p.sizes);
  for (auto& s : sets) memory_limit = std::max(memory_limit, set_size(s, p.sizes));
  bool inner = false;
  for (int l : all) inner |= !output.count(l);
  plan.naive_cost = flop_count(all, inner, static_cast<int>(sets.size()), p.sizes);
  plan.naive_scaling = all.size();
  plan.path = greedy_path(sets, output, p.sizes, memory_limit, plan.naive_cost);
  if (sets.size() <= 2) {
    plan.optimized_cost = plan.naive_cost;
    plan.optimized_scaling = plan.naive_scaling;
    return plan;
  }
  for (auto& step : plan.path) {
    Contraction c = find_contraction(step, sets, output);
    plan.optimized_cost += flop_count(c.contract, c.inner, static_cast<int>(step.size()), p.sizes);
    plan.optimized_scaling = std::max(plan.optimized_scaling, c.contract.size());
    sets = std::move(c.remaining);
  }
  return plan;
}

// --- lowering ----------------------------------------------------------------

struct Term {
  array a;
  Labels labels;
};

int position(const Labels& labels, int l) {
  return static_cast<int>(std::find(labels.begin(), labels.end(), l) - labels.begin());
}

bool contains(const Labels& labels, int l) {
  return std::find(labels.begin(), labels.end(), l) != labels.end();
}

// Sums the axes whose labels are not in `keep`.
Term sum_unkept(Term t, const LabelSet& keep, StreamOrDevice s) {
  std::vector<int> axes;
  Labels rest;
  for (size_t d = 0; d < t.labels.size(); ++d) {
    if (keep.count(t.labels[d])) {
      rest.push_back(t.labels[d]);
    } else {
      axes.push_back(static_cast<int>(d));
    }
  }
  if (axes.empty()) return t;
  return {sum(t.a, axes, false, s), rest};
}

// Repeated labels become one axis (their diagonal), and size-1 axes take the
// size their label has elsewhere.
Term prepare(const array& a, Labels labels, const std::map<int, int64_t>& sizes, StreamOrDevice s) {
  array x = a;
  for (;;) {
    int first = -1, second = -1;
    for (size_t i = 0; i < labels.size() && first < 0; ++i) {
      for (size_t j = i + 1; j < labels.size(); ++j) {
        if (labels[i] == labels[j]) {
          first = static_cast<int>(i);
          second = static_cast<int>(j);
          break;
        }
      }
    }
    if (first < 0) break;
    const int l = labels[first];
    x = diagonal(x, 0, first, second, s);
    labels.erase(labels.begin() + second);
    labels.erase(labels.begin() + first);
    labels.push_back(l);
  }
  Shape full;
  bool grow = false;
  for (size_t d = 0; d < labels.size(); ++d) {
    full.push_back(static_cast<int32_t>(sizes.at(labels[d])));
    grow |= full.back() != x.shape(static_cast<int>(d));
  }
  if (grow) x = broadcast_to(x, full, s);
  return {x, labels};
}

Shape dims_of(const Labels& labels, const std::map<int, int64_t>& sizes) {
  Shape out;
  for (int l : labels) out.push_back(static_cast<int32_t>(sizes.at(l)));
  return out;
}

Term contract_pair(Term a, Term b, const LabelSet& keep, const std::map<int, int64_t>& sizes,
                   StreamOrDevice s) {
  // Labels only one side has and nothing later needs are summed first.
  LabelSet keep_a = keep, keep_b = keep;
  keep_a.insert(b.labels.begin(), b.labels.end());
  keep_b.insert(a.labels.begin(), a.labels.end());
  a = sum_unkept(std::move(a), keep_a, s);
  b = sum_unkept(std::move(b), keep_b, s);
  Labels batch, summed, free_a, free_b;
  for (int l : a.labels) {
    if (contains(b.labels, l)) {
      (keep.count(l) ? batch : summed).push_back(l);
    } else {
      free_a.push_back(l);
    }
  }
  for (int l : b.labels) {
    if (!contains(a.labels, l)) free_b.push_back(l);
  }
  auto perm = [](const Term& t, std::initializer_list<const Labels*> groups) {
    std::vector<int> axes;
    for (auto* g : groups) {
      for (int l : *g) axes.push_back(position(t.labels, l));
    }
    return axes;
  };
  auto numel = [&](const Labels& ls) {
    int64_t n = 1;
    for (int l : ls) n *= sizes.at(l);
    return static_cast<int32_t>(n);
  };
  Shape batch_dims = dims_of(batch, sizes);
  Labels result = batch;
  result.insert(result.end(), free_a.begin(), free_a.end());
  result.insert(result.end(), free_b.begin(), free_b.end());
  if (summed.empty()) {
    // Nothing summed: a broadcast product, which also serves integer dtypes.
    Shape sa = batch_dims, sb = batch_dims;
    for (int l : free_a) {
      sa.push_back(static_cast<int32_t>(sizes.at(l)));
      sb.push_back(1);
    }
    for (int l : free_b) {
      sa.push_back(1);
      sb.push_back(static_cast<int32_t>(sizes.at(l)));
    }
    array x = reshape(transpose(a.a, perm(a, {&batch, &free_a}), s), sa, s);
    array y = reshape(transpose(b.a, perm(b, {&batch, &free_b}), s), sb, s);
    return {multiply(x, y, s), result};
  }
  Shape sa = batch_dims, sb = batch_dims;
  sa.push_back(numel(free_a));
  sa.push_back(numel(summed));
  sb.push_back(numel(summed));
  sb.push_back(numel(free_b));
  array x = reshape(transpose(a.a, perm(a, {&batch, &free_a, &summed}), s), sa, s);
  array y = reshape(transpose(b.a, perm(b, {&batch, &summed, &free_b}), s), sb, s);
  return {reshape(matmul(x, y, s), dims_of(result, sizes), s), result};
}

} // namespace

array einsum(const std::string& subscripts, const std::vector<array>& operands, StreamOrDevice s) {
  Plan plan = make_plan(subscripts, operands);
  const Parsed& p = plan.parsed;
  const LabelSet output(p.output.begin(), p.output.end());
  std::vector<Term> terms;
  for (size_t i = 0; i < operands.size(); ++i) {
    terms.push_back(prepare(operands[i], p.inputs[i], p.sizes, s));
  }
  // What the terms other than `skip` (and the output) still need.
  auto needed = [&](const std::vector<int>& skip) {
    LabelSet keep = output;
    for (size_t i = 0; i < terms.size(); ++i) {
      if (std::find(skip.begin(), skip.end(), static_cast<int>(i)) == skip.end()) {
        keep.insert(terms[i].labels.begin(), terms[i].labels.end());
      }
    }
    return keep;
  };
  for (auto step : plan.path) {
    if (step.size() < 2) continue;
    const LabelSet keep = needed(step);
    // A step over more than two operands (only outer products left) runs as
    // a chain of pairs; later operands keep what the rest of the chain needs.
    Term acc = terms[step[0]];
    for (size_t k = 1; k < step.size(); ++k) {
      LabelSet keep_k = keep;
      for (size_t r = k + 1; r < step.size(); ++r) {
        keep_k.insert(terms[step[r]].labels.begin(), terms[step[r]].labels.end());
      }
      acc = contract_pair(std::move(acc), terms[step[k]], keep_k, p.sizes, s);
    }
    std::sort(step.begin(), step.end());
    for (auto it = step.rbegin(); it != step.rend(); ++it) terms.erase(terms.begin() + *it);
    terms.push_back(std::move(acc));
  }
  Term last = sum_unkept(terms.back(), output, s);
  std::vector<int> order;
  for (int l : p.output) order.push_back(position(last.labels, l));
  return transpose(last.a, order, s);
}

std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts, const std::vector<array>& operands) {
  Plan plan = make_plan(subscripts, operands);
  std::ostringstream os;
  os << "  Complete contraction:  " << subscripts << "\n"
     << "         Naive scaling:  " << plan.naive_scaling << "\n"
     << "     Optimized scaling:  " << plan.optimized_scaling << "\n"
     << "      Naive FLOP count:  " << plan.naive_cost << "\n"
     << "  Optimized FLOP count:  " << plan.optimized_cost << "\n";
  return {plan.path, os.str()};
}

} // namespace loom
