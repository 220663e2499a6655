// The single-threaded ops: filter, shuffle, batch, prefetch, take, repeat.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "stages.h"

namespace pipetune::runtime {
namespace {

// One thread that pops each input item and hands it to OnElement or
// OnEndOfPass. Both return false when the pipeline stops.
class SequentialStage : public Stage {
 public:
  using Stage::Stage;

  void RunWorker(int index) override {
    StageWorker worker(*this, index);
    Configure(worker);
    Item item;
    while (true) {
      StageWorker::Input input = worker.Next(&item);
      if (input == StageWorker::Input::kClosed) return;
      if (input == StageWorker::Input::kEndOfPass) {
        if (!OnEndOfPass(worker)) return;
        continue;
      }
      if (!OnElement(worker, std::move(item.element))) return;
    }
  }

 protected:
  virtual void Configure(StageWorker&) {}
  // Must call worker.WorkDone() once for the element.
  virtual bool OnElement(StageWorker& worker, Element&& element) = 0;
  virtual bool OnEndOfPass(StageWorker& worker) { return worker.EmitEndOfPass(); }
};

class FilterStage : public SequentialStage {
 public:
  FilterStage(const models::StageConfig& config, RunState* run, std::unique_ptr<FilterFunction> fn)
      : SequentialStage(config, run), fn_(std::move(fn)) {}

 private:
  bool OnElement(StageWorker& worker, Element&& element) override {
    uint64_t begin = worker.now_ns;
    FnContext context{ElementSeed(config_.index, element.id, element.epoch, run_->options().seed)};
    StatusOr<bool> keep = KeepGuarded(*fn_, element, context);
    worker.WorkDone(begin, element.id);
    if (!keep.ok()) {
      run_->RecordFailure(config_, element, keep.status());
      if (config_.on_error == models::OnError::kStop) return false;
      worker.CountFailed();
      return true;
    }
    if (!*keep) return true;
    return worker.Emit(std::move(element));
  }

  const std::unique_ptr<FilterFunction> fn_;
};

// A shuffle buffer of `capacity` elements: each new element takes the place
// of a randomly chosen one, which goes out; at the end of a pass the buffer
// drains in random order. The generator is reseeded from `seed` and the pass
// number, so the order differs between epochs and is the same from run to
// run (given the same input order).
class ShuffleStage : public SequentialStage {
 public:
  ShuffleStage(const models::StageConfig& config, RunState* run, size_t capacity, uint64_t seed)
      : SequentialStage(config, run), capacity_(capacity), seed_(seed) {
    buffer_.reserve(std::min<size_t>(capacity_, 1 << 16));
    Reseed();
  }

 private:
  uint64_t Random() {
    state_ = Mix64(state_);
    return state_;
  }
  void Reseed() { state_ = Mix64(seed_) ^ Mix64(pass_ + 1); }

  bool OnElement(StageWorker& worker, Element&& element) override {
    uint64_t begin = worker.now_ns;
    int64_t in_bytes = static_cast<int64_t>(element.ByteSize());
    if (buffer_.size() < capacity_) {
      buffer_.push_back(std::move(element));
      AccountState(in_bytes);
      worker.WorkDone(begin, buffer_.back().id);
      return true;
    }
    Element& slot = buffer_[Random() % buffer_.size()];
    Element out = std::move(slot);
    slot = std::move(element);
    AccountState(in_bytes - static_cast<int64_t>(out.ByteSize()));
    worker.WorkDone(begin, out.id);
    return worker.Emit(std::move(out));
  }

  bool OnEndOfPass(StageWorker& worker) override {
    while (!buffer_.empty()) {
      std::swap(buffer_[Random() % buffer_.size()], buffer_.back());
      Element out = std::move(buffer_.back());
      buffer_.pop_back();
      AccountState(-static_cast<int64_t>(out.ByteSize()));
      if (!worker.Emit(std::move(out))) return false;
    }
    ++pass_;
    Reseed();
    return worker.EmitEndOfPass();
  }

  const size_t capacity_;
  const uint64_t seed_;
  uint64_t pass_ = 0;
  uint64_t state_ = 0;
  std::vector<Element> buffer_;
};

// Groups `size` elements into one whose `items` are they, in order. A batch's
// id is its ordinal in the pass; its epoch is its first member's. With
// BuildOptions::collate_batches the members' payloads are copied into the
// batch's own, one after another (what a tensor wraps as it is).
class BatchStage : public SequentialStage {
 public:
  BatchStage(const models::StageConfig& config, RunState* run, size_t size, bool drop_remainder)
      : SequentialStage(config, run), size_(size), drop_remainder_(drop_remainder) {
    pending_.reserve(std::min<size_t>(size_, 4096));
  }

 private:
  Element TakeBatch() {
    Element batch;
    batch.id = next_batch_id_++;
    batch.epoch = pending_.front().epoch;
    batch.items = std::move(pending_);
    pending_ = {};
    pending_.reserve(std::min<size_t>(size_, 4096));
    AccountState(-pending_bytes_);
    pending_bytes_ = 0;
    return batch;
  }

  // Moves the members' payloads into one buffer; an error names the first
  // member that differs from the first one.
  static Status Collate(Element& batch) {
    const Element& first = batch.items.front();
    if ((first.dtype != DType::kU8 && first.dtype != DType::kF32) || !first.data) {
      return Failed(
          fmt::format("element {}: cannot collate a batch of elements without an image payload "
                      "(decode them with jpeg_decode)",
                      first.id));
    }
    const size_t one = first.data->size();
    for (const Element& item : batch.items) {
      if (item.dtype != first.dtype || item.shape != first.shape || !item.data || item.data->size() != one) {
        return Failed(fmt::format(
            "element {}{}: its shape {}x{}x{} differs from the batch's first ({}x{}x{}): give every image "
            "one "
            "size (random_crop_flip, center_crop or resize with height and width) before the batch",
            item.id, item.path.empty() ? "" : " (" + item.path + ")", item.shape[0], item.shape[1],
            item.shape[2], first.shape[0], first.shape[1], first.shape[2]));
      }
    }
    auto data = std::make_shared<Bytes>(one * batch.items.size());
    uint8_t* out = data->data();
    for (Element& item : batch.items) {
      std::memcpy(out, item.data->data(), one);
      out += one;
      item.data.reset();
    }
    batch.dtype = first.dtype;
    batch.shape = first.shape;
    batch.data = std::move(data);
    return Status::Ok();
  }

  bool EmitBatch(StageWorker& worker, Element&& batch) {
    if (run_->options().collate_batches) {
      // Not one element's failure: every later batch would fail alike, so it
      // stops the run whatever on_error says.
      Status collated = Collate(batch);
      if (!collated.ok()) {
        run_->Fail(Failed(models::StageKeyError(config_, "", collated.message())));
        return false;
      }
    }
    return worker.Emit(std::move(batch));
  }

  bool OnElement(StageWorker& worker, Element&& element) override {
    uint64_t begin = worker.now_ns;
    int64_t bytes = static_cast<int64_t>(element.ByteSize());
    uint64_t id = element.id;
    pending_.push_back(std::move(element));
    pending_bytes_ += bytes;
    AccountState(bytes);
    if (pending_.size() < size_) {
      worker.WorkDone(begin, id);
      // Nothing to do before the batch's last member: sleep until then (or
      // the input is half full), not one wake-up per member.
      worker.set_wake_at(size_ - pending_.size());
      return true;
    }
    Element batch = TakeBatch();
    worker.WorkDone(begin, batch.id);
    worker.set_wake_at(size_);
    return EmitBatch(worker, std::move(batch));
  }

  bool OnEndOfPass(StageWorker& worker) override {
    if (!pending_.empty()) {
      if (drop_remainder_) {
        pending_.clear();
        AccountState(-pending_bytes_);
        pending_bytes_ = 0;
      } else if (!EmitBatch(worker, TakeBatch())) {
        return false;
      }
    }
    next_batch_id_ = 0;
    worker.set_wake_at(size_);
    return worker.EmitEndOfPass();
  }

  const size_t size_;
  const bool drop_remainder_;
  std::vector<Element> pending_;
  int64_t pending_bytes_ = 0;
  uint64_t next_batch_id_ = 0;
};

// Its own thread keeps up to `buffer` elements ready in its output buffer,
// so the consumer takes them without waiting while the stages before work on
// the next ones. It moves one element at a time, so that it holds at most
// `buffer` elements plus the one in its hands: the memory the tuner budgets.
class PrefetchStage : public SequentialStage {
 public:
  PrefetchStage(const models::StageConfig& config, RunState* run, size_t buffer)
      : SequentialStage(config, run), buffer_(buffer) {}

  Queue::Limits OutputLimits() const override {
    return Queue::Limits{buffer_, ~uint64_t{0}, 1, /*refill_at_half=*/false};
  }

 private:
  void Configure(StageWorker& worker) override { worker.set_max_chunk(1); }

  bool OnElement(StageWorker& worker, Element&& element) override {
    worker.WorkDone(worker.now_ns, element.id);
    return worker.Emit(std::move(element));
  }

  const size_t buffer_;
};

// The first `count` elements of each pass. Once it has them it ends its pass
// at once (marker downstream), cancels the pass upstream, and drops what is
// still on its way until the upstream marker arrives.
class TakeStage : public SequentialStage {
 public:
  TakeStage(const models::StageConfig& config, RunState* run, uint64_t count)
      : SequentialStage(config, run), count_(count) {}

 private:
  bool OnElement(StageWorker& worker, Element&& element) override {
    worker.WorkDone(worker.now_ns, element.id);
    if (!draining_ && taken_ >= count_ && !Cut(worker)) return false;
    if (draining_) return true;
    ++taken_;
    if (!worker.Emit(std::move(element))) return false;
    return taken_ < count_ || Cut(worker);
  }

  bool Cut(StageWorker& worker) {
    upstream_->Cancel();  // before our marker: any later request is not cancelled
    draining_ = true;
    taken_ = 0;
    return worker.EmitEndOfPass();
  }

  bool OnEndOfPass(StageWorker& worker) override {
    taken_ = 0;
    if (draining_) {
      draining_ = false;  // this marker closes the pass we already ended
      return true;
    }
    return worker.EmitEndOfPass();
  }

  const uint64_t count_;
  uint64_t taken_ = 0;
  bool draining_ = false;
};

// Answers each pass request with `count` passes of its upstream (absent: for
// ever), numbering their epochs 0, 1, 2, ... An upstream pass that is empty
// ends the repetition, which would otherwise spin for ever on nothing.
class RepeatStage : public PassServingStage {
 public:
  RepeatStage(const models::StageConfig& config, RunState* run, std::optional<uint64_t> count)
      : PassServingStage(config, run), count_(count) {}

  void Cancel() override {
    // Under mu_ so that a cancel never slips between the worker's check and
    // its next upstream request (which the upstream cancel would then miss).
    std::lock_guard<std::mutex> lock(mu_);
    channel_.Cancel();
    upstream_->Cancel();
  }

 protected:
  bool ServePass(StageWorker& worker, const RequestChannel::Request& request) override {
    for (uint64_t pass = 0; !count_ || pass < *count_; ++pass) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (channel_.Cancelled(request) || run_->stopping()) break;
        upstream_->RequestPass(next_epoch_++);
      }
      uint64_t elements = 0;
      if (!ForwardPass(worker, &elements)) return false;
      if (elements == 0) break;
    }
    return true;
  }

 private:
  bool ForwardPass(StageWorker& worker, uint64_t* elements) {
    Item item;
    while (true) {
      StageWorker::Input input = worker.Next(&item);
      if (input == StageWorker::Input::kClosed) return false;
      if (input == StageWorker::Input::kEndOfPass) return true;
      worker.WorkDone(worker.now_ns, item.element.id);
      ++*elements;
      if (!worker.Emit(std::move(item.element))) return false;
    }
  }

  const std::optional<uint64_t> count_;
  std::mutex mu_;
  uint32_t next_epoch_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Stage>> MakeSequentialStage(const models::StageConfig& config, RunState* run,
                                                     const FunctionRegistry& registry) {
  using models::Op;
  switch (config.op) {
    case Op::kFilter: {
      PIPETUNE_ASSIGN_OR_RETURN(auto fn, registry.MakeFilter(config));
      return std::unique_ptr<Stage>(new FilterStage(config, run, std::move(fn)));
    }
    case Op::kShuffle: {
      PIPETUNE_ASSIGN_OR_RETURN(auto buffer, models::ArgInt(config, "buffer", 1));
      if (!buffer) {
        return InvalidInput(
            models::StageKeyError(config, "args.buffer", "missing: shuffle needs a buffer size >= 1"));
      }
      PIPETUNE_ASSIGN_OR_RETURN(auto seed, models::ArgInt(config, "seed", 0));
      return std::unique_ptr<Stage>(
          new ShuffleStage(config, run, static_cast<size_t>(*buffer),
                           static_cast<uint64_t>(seed.value_or(0)) + run->options().seed));
    }
    case Op::kBatch: {
      PIPETUNE_ASSIGN_OR_RETURN(auto size, models::ArgInt(config, "size", 1));
      if (!size) {
        return InvalidInput(models::StageKeyError(config, "args.size", "missing: batch needs a size >= 1"));
      }
      PIPETUNE_ASSIGN_OR_RETURN(bool drop, models::BatchDropsRemainder(config));
      return std::unique_ptr<Stage>(new BatchStage(config, run, static_cast<size_t>(*size), drop));
    }
    case Op::kPrefetch: {
      int64_t buffer = config.buffer.value_or(1);
      if (buffer < 1) return InvalidInput(models::StageKeyError(config, "buffer", "must be >= 1"));
      return std::unique_ptr<Stage>(new PrefetchStage(config, run, static_cast<size_t>(buffer)));
    }
    case Op::kTake: {
      PIPETUNE_ASSIGN_OR_RETURN(auto count, models::ArgInt(config, "count", 0));
      if (!count) {
        return InvalidInput(models::StageKeyError(config, "args.count", "missing: take needs a count >= 0"));
      }
      return std::unique_ptr<Stage>(new TakeStage(config, run, static_cast<uint64_t>(*count)));
    }
    default:
      return InvalidInput(models::StageKeyError(
          config, "op", fmt::format("{} is not a sequential op", models::OpName(config.op))));
  }
}

StatusOr<std::unique_ptr<Stage>> MakeRepeatStage(const models::StageConfig& config, RunState* run) {
  PIPETUNE_ASSIGN_OR_RETURN(auto count, models::ArgInt(config, "count", 1));
  std::optional<uint64_t> n;
  if (count) n = static_cast<uint64_t>(*count);
  return std::unique_ptr<Stage>(new RepeatStage(config, run, n));
}

}  // namespace pipetune::runtime
