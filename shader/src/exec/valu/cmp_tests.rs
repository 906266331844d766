//! Tests of the VALU compares.
