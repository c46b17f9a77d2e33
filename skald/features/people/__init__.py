"""People: the household directory (each member's date of birth, sex and notes, edited by
administrators on the People page) and supervision (who looks after whom).

`hooks` registers it; `routes` is the API (`/api/people/...`); `schema` the registry
migrations; `prompt` the `USER_PROFILE` block; `web/people.js` the People page's editor
and the profile page's supervision line. The rows and queries live below, in
`skald/store/people.py`, because the conversation review reads them too.
"""
