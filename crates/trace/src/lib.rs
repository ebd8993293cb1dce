//! tiercache-trace (under construction).
