#include "loom/backend/cuda/launch_batch.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace loom::cuda {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  // FNV-1a over 64-bit words: enough to tell launch sequences apart (a
  // collision is caught by comparing the full signature).
  h ^= v;
  return h * 1099511628211ull;
}

} // namespace

bool LaunchBatch::Signature::operator==(const Signature& o) const {
  return function == o.function && grid[0] == o.grid[0] && grid[1] == o.grid[1] &&
         grid[2] == o.grid[2] && block[0] == o.block[0] && block[1] == o.block[1] &&
         block[2] == o.block[2] && shared_bytes == o.shared_bytes && params_size == o.params_size;
}

LaunchBatch::LaunchBatch(GraphDriver& driver, Options options)
    : driver_(driver), options_(options) {}

LaunchBatch::~LaunchBatch() {
  for (auto& g : graphs_) driver_.destroy(g.exec);
}

bool LaunchBatch::record(const void* function, const unsigned grid[3], const unsigned block[3],
                         unsigned shared_bytes, const ParamLayout& layout, void** args) {
  uint32_t size = 0;
  for (const ParamSlot& s : layout) size = std::max(size, s.offset + s.size);
  LaunchRecord r{function,
                 {grid[0], grid[1], grid[2]},
                 {block[0], block[1], block[2]},
                 shared_bytes,
                 &layout,
                 static_cast<uint32_t>(params_.size()),
                 size};
  params_.resize(params_.size() + size);
  unsigned char* dst = params_.data() + r.params_begin;
  for (size_t i = 0; i < layout.size(); ++i) {
    std::memcpy(dst + layout[i].offset, args[i], layout[i].size);
  }
  records_.push_back(r);
  Signature sig{
      function, {grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]}, shared_bytes, size};
  signature_.push_back(sig);
  uint64_t h = records_.size() == 1 ? 14695981039346656037ull : key_;
  h = mix(h, reinterpret_cast<uintptr_t>(function));
  h = mix(h, (uint64_t(grid[0]) << 32) | grid[1]);
  h = mix(h, (uint64_t(grid[2]) << 32) | block[0]);
  h = mix(h, (uint64_t(block[1]) << 32) | block[2]);
  h = mix(h, (uint64_t(shared_bytes) << 32) | size);
  key_ = h;
  ++stats_.recorded;
  return records_.size() >= options_.max_pending;
}

void LaunchBatch::keep_alive(std::shared_ptr<const void> owner) {
  if (owner) keep_.push_back(std::move(owner));
}

std::vector<void**> LaunchBatch::build_args() {
  if (arg_lists_.size() < records_.size()) arg_lists_.resize(records_.size());
  std::vector<void**> args(records_.size());
  for (size_t i = 0; i < records_.size(); ++i) {
    const LaunchRecord& r = records_[i];
    auto& list = arg_lists_[i];
    list.resize(r.layout->size());
    unsigned char* base = params_.data() + r.params_begin;
    for (size_t k = 0; k < list.size(); ++k) list[k] = base + (*r.layout)[k].offset;
    args[i] = list.data();
  }
  return args;
}

void LaunchBatch::launch_directly(const std::vector<void**>& args) {
  for (size_t i = 0; i < records_.size(); ++i) {
    if (!driver_.launch(records_[i], args[i])) ++stats_.failures;
    ++stats_.direct;
  }
}

LaunchBatch::CachedGraph* LaunchBatch::find(uint64_t key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  CachedGraph& g = *it->second;
  if (g.signature.size() != signature_.size()) return nullptr;
  for (size_t i = 0; i < signature_.size(); ++i) {
    if (!(g.signature[i] == signature_[i])) return nullptr;
  }
  // Most recently used last: a sequence replayed every step stays cached
  // while one-off ones come and go.
  graphs_.splice(graphs_.end(), graphs_, it->second);
  return &g;
}

void LaunchBatch::erase(uint64_t key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  driver_.destroy(it->second->exec);
  graphs_.erase(it->second);
  index_.erase(it);
}

void LaunchBatch::insert(uint64_t key, CachedGraph graph) {
  erase(key); // a different sequence with the same hash: replaced
  while (!graphs_.empty() && graphs_.size() >= options_.max_graphs) erase(graphs_.front().key);
  graph.key = key;
  graphs_.push_back(std::move(graph));
  index_[key] = std::prev(graphs_.end());
}

void LaunchBatch::remember_failure(uint64_t key) {
  if (failed_.size() >= options_.max_sightings) failed_.clear();
  failed_[key] = 1;
}

void LaunchBatch::release_to(std::vector<std::shared_ptr<const void>>& released) {
  if (released.empty()) {
    released.swap(keep_);
  } else {
    for (auto& k : keep_) released.push_back(std::move(k));
  }
  keep_.clear();
}

void LaunchBatch::flush(std::vector<std::shared_ptr<const void>>& released) {
  if (records_.empty()) {
    release_to(released);
    return;
  }
  std::vector<void**> args = build_args();
  const size_t n = records_.size();
  if (n < options_.min_graph || options_.max_graphs == 0) {
    launch_directly(args);
  } else if (CachedGraph* g = find(key_)) {
    // Replay: only the nodes whose argument bytes changed are updated.
    changed_.clear();
    for (size_t i = 0; i < n; ++i) {
      const LaunchRecord& r = records_[i];
      const unsigned char* now = params_.data() + r.params_begin;
      if (std::memcmp(now, g->last_params.data() + g->last_begin[i], r.params_size) != 0) {
        changed_.push_back(i);
      }
    }
    bool ok = true;
    if (options_.whole_update_from != 0 && changed_.size() >= options_.whole_update_from &&
        driver_.update_all(g->exec, records_, args)) {
      ++stats_.whole_updates;
      stats_.node_updates += changed_.size();
    } else {
      for (size_t k = 0; k < changed_.size() && ok; ++k) {
        size_t i = changed_[k];
        ok = driver_.update(g->exec, g->nodes[i], records_[i], args[i]);
        if (ok) ++stats_.node_updates;
      }
    }
    if (ok && driver_.launch_graph(g->exec)) {
      ++stats_.graph_launches;
      stats_.graph_nodes += n;
      g->last_params = params_;
      for (size_t i = 0; i < n; ++i) g->last_begin[i] = records_[i].params_begin;
    } else {
      // The graph's arguments are now partly updated: it is dropped, and
      // this run (and every later one of this sequence) goes out launch by
      // launch.
      ++stats_.failures;
      erase(key_);
      remember_failure(key_);
      launch_directly(args);
    }
  } else if (failed_.count(key_) != 0) {
    ++stats_.given_up;
    launch_directly(args);
  } else if (sightings_.count(key_) == 0) {
    // Seen once: a one-off sequence is not worth a graph's instantiation.
    if (sightings_.size() >= options_.max_sightings) sightings_.clear();
    sightings_.emplace(key_, 1);
    launch_directly(args);
  } else {
    sightings_.erase(key_);
    CachedGraph g;
    g.exec = driver_.instantiate(records_, args, g.nodes);
    if (g.exec != nullptr && driver_.launch_graph(g.exec)) {
      ++stats_.graphs_built;
      ++stats_.graph_launches;
      stats_.graph_nodes += n;
      g.signature = signature_;
      g.last_params = params_;
      g.last_begin.resize(n);
      for (size_t i = 0; i < n; ++i) g.last_begin[i] = records_[i].params_begin;
      insert(key_, std::move(g));
    } else {
      ++stats_.failures;
      if (g.exec != nullptr) driver_.destroy(g.exec);
      remember_failure(key_);
      launch_directly(args);
    }
  }
  records_.clear();
  signature_.clear();
  params_.clear();
  release_to(released);
}

void LaunchBatch::discard() {
  records_.clear();
  signature_.clear();
  params_.clear();
  keep_.clear();
}

} // namespace loom::cuda
