#include "textflag.h"

// func unreachable()
TEXT ·unreachable(SB), NOSPLIT, $0-0
	UNDEF
	RET
