// What the manager runs (runtime/manager.h): a cache, a controller, a timer
// loop. The engine's cancellation is std::stop_token (CancelToken): passed to
// run() and on to every reconcile, and to the API client's cancellable calls
// (kube::Client::patch_cancellable), so stopping it also abandons requests in
// flight.
//
// Contract: run(stop) does the work on the calling thread (the manager gives
// each runnable a thread of its own) and returns promptly once `stop` is
// requested; it is called once per start (a leader-only runnable once per
// term of leadership). synced() says whether a cache has listed, or a
// controller runs (others: always true); metrics() gives a controller's
// metrics for /metrics.
#pragma once

#include <stop_token>
#include <string_view>

#include "runtime/metrics.h"

namespace ig::runtime {

using CancelToken = std::stop_token;

class Runnable {
 public:
  virtual ~Runnable() = default;
  virtual std::string_view name() const = 0;
  virtual void run(CancelToken stop) = 0;
  virtual bool synced() const { return true; }
  virtual const ControllerMetrics* metrics() const { return nullptr; }
};

}  // namespace ig::runtime
