#include "trees.h"

#include <nanobind/stl/string.h>

namespace loom::python {

namespace {

bool is_namedtuple(nb::handle h) {
  return nb::isinstance<nb::tuple>(h) && nb::hasattr(h, "_fields");
}

// Rebuilds a tuple of the same type (plain tuples and namedtuples).
nb::object make_tuple_like(nb::handle original, nb::list items) {
  if (is_namedtuple(original)) return original.type()(*items);
  return nb::tuple(items);
}

} // namespace

bool is_array(nb::handle h) { return nb::isinstance<array>(h); }

void tree_visit(nb::handle tree, const std::function<void(nb::handle)>& visit) {
  // Explicit stack: a deep tree never exhausts the C stack. Items are pushed
  // in reverse so leaves come out in order.
  std::vector<nb::handle> stack{tree};
  while (!stack.empty()) {
    nb::handle node = stack.back();
    stack.pop_back();
    if (nb::isinstance<nb::list>(node) || nb::isinstance<nb::tuple>(node)) {
      nb::sequence seq = nb::borrow<nb::sequence>(node);
      size_t n = nb::len(seq);
      for (size_t i = n; i-- > 0;) stack.push_back(seq[i]);
    } else if (nb::isinstance<nb::dict>(node)) {
      nb::list values = nb::borrow<nb::dict>(node).values();
      for (size_t i = nb::len(values); i-- > 0;) stack.push_back(values[i]);
    } else {
      visit(node);
    }
  }
}

nb::object tree_map(nb::handle tree, const std::function<nb::object(nb::handle)>& fn) {
  if (nb::isinstance<nb::list>(tree)) {
    nb::list out;
    for (nb::handle item : tree) out.append(tree_map(item, fn));
    return out;
  }
  if (nb::isinstance<nb::tuple>(tree)) {
    nb::list items;
    for (nb::handle item : tree) items.append(tree_map(item, fn));
    return make_tuple_like(tree, items);
  }
  if (nb::isinstance<nb::dict>(tree)) {
    nb::dict out;
    for (auto [k, v] : nb::borrow<nb::dict>(tree)) out[k] = tree_map(v, fn);
    return out;
  }
  return fn(tree);
}

std::vector<array> tree_flatten(nb::handle tree, bool strict) {
  std::vector<array> out;
  tree_visit(tree, [&](nb::handle leaf) {
    if (is_array(leaf)) {
      out.push_back(nb::cast<array>(leaf));
    } else if (strict) {
      throw std::invalid_argument("[tree_flatten] The argument should contain only arrays");
    }
  });
  return out;
}

nb::object tree_fill(nb::handle tree, const std::vector<array>& values, size_t& index,
                     bool strict) {
  return tree_map(tree, [&](nb::handle leaf) -> nb::object {
    if (strict || is_array(leaf)) {
      if (index >= values.size()) {
        throw std::invalid_argument("[tree_unflatten] Not enough values to fill the tree.");
      }
      return nb::cast(values[index++]);
    }
    return nb::borrow(leaf);
  });
}

std::vector<nb::object> tree_broadcast_prefix(nb::handle prefix, nb::handle tree,
                                              const char* op) {
  std::vector<nb::object> out;
  auto fail = [&]() {
    throw std::invalid_argument(std::string("[") + op +
                                "] The axes tree is not a valid prefix of the arguments.");
  };
  std::function<void(nb::handle, nb::handle)> walk = [&](nb::handle p, nb::handle t) {
    bool p_seq = nb::isinstance<nb::list>(p) || nb::isinstance<nb::tuple>(p);
    bool p_dict = nb::isinstance<nb::dict>(p);
    if (!p_seq && !p_dict) {
      tree_visit(t, [&](nb::handle leaf) {
        if (is_array(leaf)) out.push_back(nb::borrow(p));
      });
      return;
    }
    if (p_seq) {
      if (!(nb::isinstance<nb::list>(t) || nb::isinstance<nb::tuple>(t)) ||
          nb::len(p) != nb::len(t)) {
        fail();
      }
      nb::sequence ps = nb::borrow<nb::sequence>(p), ts = nb::borrow<nb::sequence>(t);
      for (size_t i = 0; i < nb::len(p); ++i) walk(ps[i], ts[i]);
      return;
    }
    if (!nb::isinstance<nb::dict>(t)) fail();
    nb::dict pd = nb::borrow<nb::dict>(p), td = nb::borrow<nb::dict>(t);
    for (auto [k, v] : td) {
      if (!pd.contains(k)) fail();
      walk(pd[k], v);
    }
  };
  walk(prefix, tree);
  return out;
}

} // namespace loom::python
