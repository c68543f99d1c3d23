"""dumps_pretty against text captured from Java fastjson 1.2.83's ``toJSONString(obj, true)``."""

from __future__ import annotations

import pytest

from bolide.common.fastjson import JSONError, dumps_pretty, loads


def test_pretty_matches_fastjson() -> None:
    value = {
        "empty": {},
        "emptyInt": {},
        "topicConfigTable": {"A": {"attributes": {}, "emptyList": [], "list": ["a", "b"], "nullField": None,
                                   "order": False, "perm": 6, "topicFilterType": "SINGLE_TAG",
                                   "topicName": 'T"x'}},
    }
    assert dumps_pretty(value).decode() == (
        '{\n\t"empty":{},\n\t"emptyInt":{},\n\t"topicConfigTable":{\n\t\t"A":{\n\t\t\t"attributes":{},\n'
        '\t\t\t"emptyList":[],\n\t\t\t"list":[\n\t\t\t\t"a",\n\t\t\t\t"b"\n\t\t\t],\n'
        '\t\t\t"order":false,\n\t\t\t"perm":6,\n\t\t\t"topicFilterType":"SINGLE_TAG",\n'
        '\t\t\t"topicName":"T\\"x"\n\t\t}\n\t}\n}'
    )


def test_pretty_int_keys_stay_on_the_opening_line_and_sets_are_compact() -> None:
    value = {"groupTopicMap": {"g": {"TopicTest"}}, "offsetTable": {"TopicTest@g": {1: 30, 0: 12, -1: 5}}}
    text = dumps_pretty(value).decode()
    assert text == ('{\n\t"groupTopicMap":{\n\t\t"g":["TopicTest"]\n\t},\n'
                    '\t"offsetTable":{\n\t\t"TopicTest@g":{-1:5,0:12,1:30\n\t\t}\n\t}\n}')
    assert loads(text) == {"groupTopicMap": {"g": ["TopicTest"]},
                           "offsetTable": {"TopicTest@g": {"-1": 5, "0": 12, "1": 30}}}


def test_common_parser_raises_json_error() -> None:
    with pytest.raises(JSONError):
        loads("{0:")
