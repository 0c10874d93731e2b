// Placeholder: attach/control_server.h's definitions are being written on their own branch (issue 21).
#include "attach/control_server.h"
