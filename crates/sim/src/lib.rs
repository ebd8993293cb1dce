//! tiercache-sim (under construction).
