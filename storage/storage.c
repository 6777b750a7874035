/* placeholder until the storage layer lands */
#include <stddef.h>
