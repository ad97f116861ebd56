#include "engine/tenant.h"

namespace pagoda::engine {

const char* PriorityClassName(PriorityClass priority) {
  switch (priority) {
    case PriorityClass::kCritical:
      return "critical";
    case PriorityClass::kStandard:
      return "standard";
    case PriorityClass::kSheddable:
      return "sheddable";
  }
  return "standard";
}

}  // namespace pagoda::engine
