/* Range check and checked multiplication (wire.h). Pure: no libc, no shifts.
 * Both are proven by verify/run.sh (Frama-C WP, contracts below). */
#include <stdint.h>

#include "baton/status.h"
#include "wire/wire.h"

/*@ // Integer division bounds a product: for a > 0, b <= m / a iff a * b <= m.
    lemma mul_le_div:
      \forall integer a, b, m; a > 0 && b >= 0 && m >= 0 ==> (b <= m / a <==> a * b <= m);
*/

/*@ assigns \nothing;
    ensures \result == 0 <==> off + n <= size;
    behavior in_range:
      assumes off + n <= size;
      ensures \result == 0;
    behavior out_of_range:
      assumes off + n > size;
      ensures \result == BATON_E_BOUNDS;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_check_range(uint64_t off, uint64_t n, uint64_t size)
{
    if (off <= size && n <= size - off)
        return 0;
    return BATON_E_BOUNDS;
}

/*@ requires \valid(out);
    assigns *out;
    behavior fits:
      assumes a * b <= UINT64_MAX;
      assigns *out;
      ensures \result == 0;
      ensures *out == a * b;
    behavior wraps:
      assumes a * b > UINT64_MAX;
      assigns \nothing;
      ensures \result == BATON_E_OVERFLOW;
    complete behaviors;
    disjoint behaviors;
*/
int baton_wire_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return BATON_E_OVERFLOW;
    //@ assert a * b <= UINT64_MAX;
    *out = a * b;
    return 0;
}
