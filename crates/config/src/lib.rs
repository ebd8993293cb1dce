//! tiercache-config (under construction).
