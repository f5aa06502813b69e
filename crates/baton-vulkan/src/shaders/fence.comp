#version 450
// The device-side fast fence (compiled by glslc; the .spv next to this file
// is what Baton loads, and a test checks the two agree when glslc is
// installed):
//   glslc --target-env=vulkan1.2 -O -o fence.spv fence.comp
//
// One invocation polls a word that the host writes (the counter a producer
// has reached) until it is at least `target`, for at most `max_polls`
// polls: a bounded spin, so a producer that dies never hangs the device
// (on lavapipe at most about a million polls, a few milliseconds).
// When the bound runs out it raises `timed_out`, which the host checks
// after the batch; `polls` says how long the wait took.

layout(local_size_x = 1) in;

layout(std430, set = 0, binding = 0) coherent volatile buffer Fence {
    uint value;
    uint timed_out;
    uint polls;
};

layout(push_constant) uniform Params {
    uint target;
    uint max_polls;
} p;

// One poll: a fresh load of the word (it is volatile).
#define POLL reached = reached || value >= p.target;
#define POLL4 POLL POLL POLL POLL

void main() {
    // llvmpipe ends a shader's loops after 65535 iterations in all, so each
    // iteration polls 16 times: `max_polls` counts polls, in steps of 16.
    // The loop ends on its condition, not on a return, so that every SIMD
    // lane of a CPU driver leaves it at once.
    uint i = 0u;
    bool reached = value >= p.target;
    while (!reached && i < p.max_polls) {
        POLL4 POLL4 POLL4 POLL4
        i += 16u;
    }
    polls = i;
    if (!reached) {
        timed_out = 1u;
    }
}
