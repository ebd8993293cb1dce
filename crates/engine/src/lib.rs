//! tiercache-engine (under construction).
