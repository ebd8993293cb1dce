//! tiercache-metrics (under construction).
