#include "bench/arrival_schedule.h"

#include <cmath>

namespace pagoda::bench {

std::vector<double> GammaArrivalTimes(int n, double rate, double burstiness, std::mt19937_64& rng) {
  if (n <= 0) return {};
  if (!std::isfinite(rate) || rate <= 0) return std::vector<double>(n, 0.0);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  std::vector<double> gaps(n);
  for (double& g : gaps) g = gap(rng);
  return RescaleArrivals(gaps, rate);
}

std::vector<double> RescaleArrivals(const std::vector<double>& gaps, double rate) {
  std::vector<double> times(gaps.size());
  double sum = 0;
  for (size_t i = 0; i < gaps.size(); ++i) {
    sum += gaps[i];
    times[i] = sum;
  }
  if (times.empty() || sum <= 0) return times;
  // Normalizing keeps the achieved rate at `rate` however the draws fell: the last request
  // is sent at n / rate exactly, the others keep their relative spacing.
  const double factor = static_cast<double>(gaps.size()) / rate / sum;
  for (double& t : times) t *= factor;
  times.back() = static_cast<double>(gaps.size()) / rate;
  return times;
}

}  // namespace pagoda::bench
