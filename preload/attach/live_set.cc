// Placeholder: attach/live_set.h's definitions are being written on their own branch (issue 21).
#include "attach/live_set.h"
