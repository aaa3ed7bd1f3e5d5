// A runnable around a piece with its own start() and stop(): run() starts
// it, waits for the stop request, stops it; synced() is the piece's.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/runnable.h"

namespace ig::runtime {

class Service final : public Runnable {
 public:
  Service(std::string name, std::function<void()> start, std::function<void()> stop,
          std::function<bool()> synced = {})
      : name_(std::move(name)), start_(std::move(start)), stop_(std::move(stop)), synced_(std::move(synced)) {}

  std::string_view name() const override { return name_; }
  bool synced() const override { return !synced_ || synced_(); }
  void run(CancelToken stop) override {
    start_();
    std::mutex m;
    std::condition_variable_any cv;
    std::unique_lock lock(m);
    cv.wait(lock, stop, [] { return false; });  // returns once stop is requested
    stop_();
  }

 private:
  std::string name_;
  std::function<void()> start_, stop_;
  std::function<bool()> synced_;
};

}  // namespace ig::runtime
