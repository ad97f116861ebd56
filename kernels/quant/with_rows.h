// Run-time row counts to compile-time ones, for the multi-row kernels.
#pragma once

namespace pagoda::kernels::quant {

// f.template operator()<R>() for R = rows, 1 <= rows <= 8 (more: 8).
template <typename F>
void WithRows(int rows, F&& f) {
  switch (rows) {
    case 1:
      return f.template operator()<1>();
    case 2:
      return f.template operator()<2>();
    case 3:
      return f.template operator()<3>();
    case 4:
      return f.template operator()<4>();
    case 5:
      return f.template operator()<5>();
    case 6:
      return f.template operator()<6>();
    case 7:
      return f.template operator()<7>();
    default:
      return f.template operator()<8>();
  }
}

}  // namespace pagoda::kernels::quant
