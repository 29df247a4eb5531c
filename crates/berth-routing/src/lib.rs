//! berth's routing core (in progress).
