// What the manager runs. run(stop) works on the calling thread and returns
// promptly once `stop` (passed on to every reconcile and cancellable API
// call) is requested; once per start, or per term when leader-only.
// synced(): a cache has listed, a controller runs.
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
