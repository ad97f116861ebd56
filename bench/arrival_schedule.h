// When an open-loop run sends each request (vLLM benchmark_serving's arrival process).
#pragma once

#include <random>
#include <vector>

namespace pagoda::bench {

// Send offsets in seconds from the run's start for `n` requests at `rate` req/s: gaps drawn
// from Gamma(shape = burstiness, scale = 1 / (rate * burstiness)), whose mean is 1/rate
// (burstiness 1 is a Poisson process, smaller is burstier), accumulated, then scaled so that
// the last request goes out at exactly n / rate. All zeros when `rate` is not finite or not
// positive (everything at once). Precondition: burstiness > 0.
std::vector<double> GammaArrivalTimes(int n, double rate, double burstiness, std::mt19937_64& rng);

// The running sums of `gaps`, scaled so that the last equals gaps.size() / rate; returned
// unscaled when they sum to 0. Precondition: rate > 0 and finite.
std::vector<double> RescaleArrivals(const std::vector<double>& gaps, double rate);

}  // namespace pagoda::bench
