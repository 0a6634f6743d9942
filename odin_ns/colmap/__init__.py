"""COLMAP sparse models read and written with numpy alone.

One home for COLMAP I/O, below both the AOT schedule (tracks) and the nerfstudio layer (dataparser seed points, the
demo-scene generator), so neither reaches into the other and the schedule never imports nerfstudio.
"""
