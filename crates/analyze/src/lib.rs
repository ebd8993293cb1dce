//! tiercache-analyze (under construction).
